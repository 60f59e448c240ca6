"""Lab 08 on two CPU ranks (gloo): FSDP2's shards against the formula, element by element.

A vocabulary of 255 rows does not split evenly, so the two ranks hold different numbers of
elements and FSDP2's padding shows in the storage.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from infralens.training.fsdp_shards import MODES, state_prediction
from infralens.training.launch import torchrun
from infralens.training.zero_memory_accounting import fsdp_local_numel, model_state_per_gpu

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("fsdp") / "shards.json"
    done = torchrun("infralens.training.fsdp_shards",
                    ["--modes", ",".join(MODES), "--vocab", "255", "--steps", "2", "--out", str(out)],
                    nproc=2, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text())


def last(rank: dict, phase: str) -> dict:
    return [r for r in rank["readings"] if r["phase"] == phase][-1]


def test_shards_match_the_exact_split(report):
    shapes, world, psi = report["param_shapes"], report["world"], report["num_params"]
    assert world == 2 and sum(held for held, _ in (fsdp_local_numel(shapes, 2, r) for r in range(2))) == psi
    for mode in ("fsdp", "fsdp-no-reshard", "fsdp-bf16"):
        for r, rank in enumerate(report["modes"][mode]["ranks"]):
            held, padded = fsdp_local_numel(shapes, world, r)
            step = last(rank, "step")
            n, b = step["numel"], step["breakdown"]
            assert n["params"] == n["grads"] == held and n["moments"] == 2 * held
            assert b["params"] == 4 * padded  # fp32 shards, padded to rank 0's size
            assert b["grads"] == 4 * padded  # one padded reduce-scatter buffer per group
            assert b["optimizer_state"] == 8 * held + 4 * n["step_tensors"]  # + AdamW's CPU steps
    ranks = report["modes"]["fsdp"]["ranks"]
    assert last(ranks[0], "step")["numel"]["params"] != last(ranks[1], "step")["numel"]["params"]


def test_sharded_state_is_the_formula_up_to_padding(report):
    psi = report["num_params"]
    ideal = model_state_per_gpu(psi, 2, "fsdp-full", precision="fp32")  # 16 Ψ / 2
    for rank in report["modes"]["fsdp"]["ranks"]:
        b = last(rank, "step")["breakdown"]
        steps = 4 * last(rank, "step")["numel"]["step_tensors"]  # AdamW's CPU step scalars
        got = b["params"] + b["grads"] + b["optimizer_state"] - steps
        assert abs(got - ideal.total) <= 16 * 64  # at most one padded row of the 64-wide table


def test_ddp_replicates(report):
    psi = report["num_params"]
    for mode in ("ddp", "ddp-bucket-view"):
        for rank in report["modes"][mode]["ranks"]:
            b = last(rank, "step")["breakdown"]
            assert b["params"] == b["grads"] == 4 * psi


def test_no_reshard_keeps_the_gathered_parameters_until_backward(report):
    shapes = report["param_shapes"]
    for r, rank in enumerate(report["modes"]["fsdp-no-reshard"]["ranks"]):
        want = state_prediction("fsdp-no-reshard", shapes, 2, r)
        # The module's parameters are now the gathered copy (the shards stay, held by FSDP):
        # the allocator sees both, the module's .parameters() only the copy.
        fwd = last(rank, "forward")["breakdown"]["params"]
        gathered = 4 * 2 * fsdp_local_numel(shapes, 2, 0)[1]  # every rank's padded shard, fp32
        assert fwd == want["forward"]["params"] - want["model"]["params"] == gathered
        assert last(rank, "backward")["breakdown"]["params"] == want["backward"]["params"]


def test_same_losses_whatever_the_layout(report):
    """DDP and FSDP compute the same step: same initial weights, same batches per rank."""
    def losses(mode: str) -> list[float]:  # rank 0's, then rank 1's
        return [x for r in report["modes"][mode]["ranks"] for x in r["losses"]]

    for mode in ("ddp-bucket-view", "fsdp", "fsdp-no-reshard"):
        assert losses(mode) == pytest.approx(losses("ddp"), rel=1e-5)
    assert losses("fsdp-bf16") == pytest.approx(losses("ddp"), abs=0.1)


def test_prediction_lines():
    shapes = [[255, 64], [32, 64], [64]]
    psi = sum(a * (b[0] if b else 1) for a, *b in shapes)
    ddp = state_prediction("ddp", shapes, 2, 0)
    view = state_prediction("ddp-bucket-view", shapes, 2, 0)
    assert ddp["step"]["total"] == 20 * psi and view["step"]["total"] == 16 * psi
    assert ddp["model"]["buckets"] == 4 * psi and view["zero_grad"]["total"] == 16 * psi
    fsdp = [state_prediction("fsdp", shapes, 2, r)["step"]["total"] for r in range(2)]
    assert fsdp[0] > fsdp[1] and sum(fsdp) < 16 * psi + 16 * 64


def test_bad_modes_one_line_exit_2():
    done = subprocess.run([sys.executable, "-m", "infralens.training.fsdp_shards", "--modes", "zero4"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "modes must be among" in done.stderr
