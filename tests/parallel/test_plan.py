"""The planner's ledger against independent counts, its validation against published runs, and
its command line."""

import pytest

from infralens.memory import activation_bytes_per_layer, count_parameters
from infralens.memory.zero import zero_lines
from infralens.parallel import collective_bytes, pipeline_bubble, training_flops
from infralens.parallel.calibration import calibrated_assumptions
from infralens.parallel.cluster import cluster_from_dict
from infralens.parallel.plan import (
    Assumptions,
    Job,
    Layout,
    Options,
    Plan,
    best_by_layout,
    estimate,
    gpt_shape,
    main,
    plan,
)
from infralens.parallel.published import LLAMA3_405B, LLAMA3_405B_SHAPE, MEGATRON_TABLE1

ASSUME = Assumptions(matmul=0.5, nvlink=0.8, network=0.8, memory_usable=0.9)


def selene(gpus):
    return cluster_from_dict({"gpu": "a100", "nodes": gpus // 8, "gpus_per_node": 8,
                              "inter_node_bandwidth": "200 Gb/s"})


def test_single_gpu_ledger_is_lab01s():
    shape = gpt_shape(4, 256, 4, vocab=1000, seq=128)
    job = Job(shape, 128, 2)
    cl = cluster_from_dict({"gpu": "h100", "nodes": 1, "gpus_per_node": 1})
    e = estimate(job, cl, Plan(Layout(1, 1, 1), 2, 1, "none", "ddp"), ASSUME)
    n = count_parameters(shape).total
    assert e.memory["weights"] == 2 * n and e.memory["optimizer states"] == 12 * n
    assert e.memory["activations"] == 4 * activation_bytes_per_layer(128, 2, 256, 4)
    assert e.memory["logits"] == 4 * 2 * 128 * 1000
    assert e.micro_batches == 1 and e.bubble == 0
    biases = 3 * 2 * 128 * 4 * 2 * 9 * 256  # Megatron's formula has no bias FLOPs
    assert e.model_flops - training_flops(2, 128, 4, 256, 1000) == biases


def test_parallel_terms():
    shape = gpt_shape(8, 1024, 16, seq=512)
    job = Job(shape, 512, 64)
    cl = cluster_from_dict({"gpu": "h100", "nodes": 2, "gpus_per_node": 8,
                            "inter_node_bandwidth": "400 Gb/s"})
    x = estimate(job, cl, Plan(Layout(2, 2, 4), 2, 1, "selective", 1), ASSUME)
    m = 64 // (4 * 2)
    assert x.bubble == pipeline_bubble(2, m)
    # TP: four all-reduces of b·s·h 16-bit values per layer per micro-batch, 4 layers per stage
    per_mb = 4 * 4 * collective_bytes("all_reduce", 2, 2 * 2 * 512 * 1024)
    assert x.comm_bytes["tensor parallel"] == pytest.approx((m + 1) * per_mb)
    lines = zero_lines(1, 4, 1)  # ZeRO-1 shards only the optimizer states
    assert lines.weights == 2 and lines.optimizer_states == 12
    assert x.memory["optimizer states"] < 6 * x.memory["weights"]


@pytest.mark.parametrize("run", MEGATRON_TABLE1, ids=lambda r: f"{r.params_billion}B")
def test_every_megatron_table1_run_fits(run):
    assume, _ = calibrated_assumptions()
    job = Job(gpt_shape(run.layers, run.hidden, run.heads), 2048, run.batch)
    pub = Plan(Layout(run.tp, run.pp, run.dp), run.micro_batch, run.chunks, "full", "ddp")
    e = estimate(job, selene(run.gpus), pub, assume)
    assert e.feasible, f"{e.memory_total / 2**30:.1f} GiB > {e.capacity / 2**30:.1f} GiB"
    # the published layout is within reach of the planner's best under the same options
    opts = Options(micro_batches=(1, 2, 4, 8, 16), chunks=(1, 2, 3, 4, 5, 6), recompute=("full",),
                   zero=("ddp",))
    ranked = best_by_layout(plan(job, selene(run.gpus), assume, opts))
    layouts = [x.plan.layout for x in ranked]
    assert pub.layout in layouts
    assert ranked[layouts.index(pub.layout)].step_time <= 1.15 * ranked[0].step_time


def test_llama3_405b_layouts_fit_with_sharded_optimizer_and_recompute():
    assume, _ = calibrated_assumptions()
    shape = LLAMA3_405B_SHAPE
    for r in LLAMA3_405B:
        cl = cluster_from_dict({"gpu": "h100", "nodes": r.gpus // 8, "gpus_per_node": 8,
                                "inter_node_bandwidth": "400 Gb/s"})
        e = estimate(Job(shape, r.seq, r.global_batch), cl,
                     Plan(Layout(r.tp, r.pp, r.dp, r.cp), 1, 1, "full", 2), assume)
        assert e.feasible


def test_cli_good_and_bad(tmp_path, capsys):
    yaml_file = tmp_path / "c.yaml"
    yaml_file.write_text("gpu: h100\nnodes: 2\ngpus_per_node: 8\ninter_node_bandwidth: 400 Gb/s\n")
    assert main(["--model", "llama-3-8b", "--cluster", str(yaml_file), "--seq", "4096",
                 "--global-batch", "64", "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "llama-3-8b on 16 x H100" in out and " 3  TP" in out and "Assumptions:" in out
    for argv, message in [
        (["--model", "llama-3-8b", "--cluster", str(tmp_path / "none.yaml"), "--seq", "8",
          "--global-batch", "8"], "cannot read cluster file"),
        (["--gpt", "2,64", "--cluster", str(yaml_file), "--seq", "8", "--global-batch", "8"],
         "--gpt takes"),
        (["--model", "llama-3-8b", "--cluster", str(yaml_file), "--seq", "-8",
          "--global-batch", "8"], "positive integer"),
        (["--model", "llama-3-8b", "--cluster", str(yaml_file), "--seq", "8", "--global-batch", "8",
          "--zero", "4"], "--zero"),
        (["--gpt", "128,25600,160", "--cluster", str(yaml_file), "--seq", "2048",
          "--global-batch", "16", "--zero", "ddp"], "no plan"),  # 1T parameters on 16 GPUs
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
