"""One training step measured on the CPU by adding up tensor bytes; the ledger's prediction and the
forward account against those measurements and against the H100 measurements of Lab 01's record."""

from __future__ import annotations

import functools
import json

import pytest
import torch
import torch.nn.functional as F

from infralens.memory.measure import (
    PHASES,
    forward_account,
    forward_left_out,
    ledger_prediction,
    measure_cpu_step,
    measure_training_step,
    saved_bytes,
)
from infralens.models.gpt import GPTConfig
from infralens.tools.glue import record

B, T, D, H = 2, 16, 32, 4


def tiny(n_layers: int = 2) -> GPTConfig:
    return GPTConfig(vocab_size=64, n_positions=T, d_model=D, n_layers=n_layers, n_heads=H)


@pytest.fixture(scope="module")
def fp32_step() -> dict:
    return measure_cpu_step(tiny(), B, T, precision="fp32")


def test_phases_and_json(fp32_step):
    assert tuple(fp32_step["phases"]) == PHASES
    assert fp32_step["measured_by"] == "tensor_bytes"
    json.dumps(fp32_step)  # plain JSON-able
    for p in fp32_step["phases"].values():
        assert p["allocated"] == sum(p["breakdown"].values()) and p["peak"] is None


def test_fp32_adamw_bytes(fp32_step):
    psi = fp32_step["num_params"]
    n_tensors = fp32_step["num_param_tensors"]
    ph = {k: v["breakdown"] for k, v in fp32_step["phases"].items()}
    for name in PHASES:
        assert ph[name]["params"] == 4 * psi  # fp32 weights, tied embedding counted once
    assert ph["model"]["grads"] == ph["forward"]["grads"] == 0
    assert ph["forward"]["activations"] > 0
    assert ph["backward"] == {"params": 4 * psi, "grads": 4 * psi,
                              "optimizer_state": 0, "activations": 0}
    # exp_avg + exp_avg_sq: 8 bytes per parameter, plus AdamW's per-tensor `step`, a 0-dim
    # float32 tensor (kept on the CPU when fused=False and capturable=False): 4 bytes each.
    assert ph["step"]["grads"] == 4 * psi
    assert ph["step"]["optimizer_state"] == 8 * psi + 4 * n_tensors
    assert ph["zero_grad"]["grads"] == 0
    assert ph["zero_grad"]["optimizer_state"] == 8 * psi + 4 * n_tensors
    assert fp32_step["activation_bytes_measured"] == ph["forward"]["activations"]


def test_activations_per_layer():
    """Each extra block adds what it saves for backward: ~64 bytes x tokens x d in fp32
    (LayerNorm in/out 4+4+4+4, QKV out 12, attention out 4, MLP hidden 16 + 16), plus
    LayerNorm statistics and the attention logsumexp; with checkpointing only its 4-byte input.
    """
    tokens_d = B * T * D

    def act(n_layers: int, checkpoint: bool) -> int:
        r = measure_cpu_step(tiny(n_layers), B, T, checkpoint=checkpoint)
        return r["activation_bytes_measured"]

    per_layer_ckpt = act(2, True) - act(1, True)
    assert per_layer_ckpt == 4 * tokens_d
    per_layer = act(2, False) - act(1, False)
    assert 64 * tokens_d <= per_layer <= 66 * tokens_d


def test_checkpoint_same_loss_less_activation():
    plain = measure_cpu_step(tiny(), B, T)
    ckpt = measure_cpu_step(tiny(), B, T, checkpoint=True)
    assert plain["loss"] == ckpt["loss"]
    assert ckpt["activation_bytes_measured"] < plain["activation_bytes_measured"]
    for name in ("backward", "step", "zero_grad"):
        assert plain["phases"][name] == ckpt["phases"][name]


def test_amp_keeps_fp32_state():
    r = measure_cpu_step(tiny(), B, T, precision="amp")
    psi = r["num_params"]
    assert r["phases"]["backward"]["breakdown"]["grads"] == 4 * psi


def test_errors():
    with pytest.raises(ValueError):
        measure_cpu_step(tiny(), B, T, precision="fp16")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            measure_training_step(tiny(), B, T, device="cuda")


# --- the ledger's prediction ---------------------------------------------------------------------

@pytest.mark.parametrize("precision, checkpoint, per_layer_sbh", [
    # Korthikanti et al. (2022), Table 2, t = 1: selective recomputation keeps 34 sbh bytes per
    # layer (2-byte activations), full recomputation the layer's 2-byte input, 2 sbh. fp32: twice.
    ("amp", False, 34), ("amp", True, 2), ("fp32", False, 68), ("fp32", True, 4),
])
def test_ledger_prediction_by_hand(precision, checkpoint, per_layer_sbh):
    psi, b, s = 1_000_003, 3, 16
    cfg = GPTConfig(vocab_size=64, n_positions=s, d_model=32, n_layers=5, n_heads=4)
    got = ledger_prediction(psi, cfg, b, s, precision=precision, checkpoint=checkpoint)
    # AdamW, no master copy: fp32 weights (4), fp32 gradients (4), exp_avg and exp_avg_sq (8).
    assert got == {"model": 4 * psi, "forward": 4 * psi + 5 * per_layer_sbh * s * b * 32,
                   "backward": 8 * psi, "step": 16 * psi, "zero_grad": 12 * psi}
    assert tuple(got) == PHASES


def test_ledger_prediction_is_what_the_cpu_step_holds_outside_the_forward(fp32_step):
    cfg = GPTConfig(**fp32_step["config"])
    want = ledger_prediction(fp32_step["num_params"], cfg, B, T, precision="fp32", checkpoint=False)
    got = {name: phase["allocated"] for name, phase in fp32_step["phases"].items()}
    assert got["model"] == want["model"] and got["backward"] == want["backward"]
    # AdamW's per-tensor `step` scalars live on the CPU (measure.py): 4 bytes per parameter tensor
    # that a CPU run counts and the ledger does not.
    scalars = 4 * fp32_step["num_param_tensors"]
    assert got["step"] == want["step"] + scalars and got["zero_grad"] == want["zero_grad"] + scalars


def _h100_runs() -> dict[str, dict]:
    """Lab 01's measurements on an H100 (allocator and tensor bytes), every variant that ran."""
    return {name: run for name, run in record("lab01-train-step").results["variants"].items()
            if "error" not in run}


def test_ledger_prediction_is_what_the_h100_step_holds_outside_the_forward():
    runs = _h100_runs()
    assert runs
    for name, run in runs.items():
        want = ledger_prediction(run["num_params"], GPTConfig(**run["config"]), run["batch"],
                                 run["seq_len"], precision=run["precision"], checkpoint=run["checkpoint"])
        for phase in ("model", "backward", "step", "zero_grad"):  # the tensors the probe found
            assert sum(run["phases"][phase]["breakdown"].values()) == want[phase], (name, phase)


def test_ledger_prediction_refuses_an_unknown_precision():
    with pytest.raises(ValueError, match="precision must be one of"):
        ledger_prediction(1000, tiny(), B, T, precision="fp8", checkpoint=False)
    # The ledger knows "mixed" (with an fp32 master copy), but no probe here runs it.
    with pytest.raises(ValueError, match="precision must be one of"):
        ledger_prediction(1000, tiny(), B, T, precision="mixed", checkpoint=False)


# --- the forward account, against the tensors autograd saved ------------------------------------

@functools.cache
def _cpu_run(precision: str, checkpoint: bool, n_layers: int) -> dict:
    return measure_cpu_step(tiny(n_layers), B, T, precision=precision, checkpoint=checkpoint)


def _accounted(run: dict) -> int:
    return sum(v for _, v in forward_account(run))


def _left_out(run: dict) -> int:
    """What forward_left_out names, as much of it as the run holds: with checkpointing only the
    final norm's statistics (the blocks' are recomputed) and the token ids stay."""
    left = forward_left_out(run)
    n_layers = run["config"]["n_layers"]
    if run["checkpoint"]:
        return left["layernorm_stats"] // (2 * n_layers + 1) + left["token_ids"]
    return n_layers * left["logsumexp_per_layer"] + left["layernorm_stats"] + left["token_ids"]


@pytest.mark.parametrize("precision", ["fp32", "amp"])
@pytest.mark.parametrize("checkpoint", [False, True])
def test_one_more_block_saves_what_the_account_and_the_left_out_rows_add(precision, checkpoint):
    # The difference of two measurements (2 blocks - 1 block) is one block's saved tensors, exact.
    one, two = _cpu_run(precision, checkpoint, 1), _cpu_run(precision, checkpoint, 2)
    measured = two["activation_bytes_measured"] - one["activation_bytes_measured"]
    assert measured == (_accounted(two) - _accounted(one)) + (_left_out(two) - _left_out(one))
    if not checkpoint:  # the per-row statistics of one block: a log-sum-exp per head, 2 norms x 2
        assert _left_out(two) - _left_out(one) == B * H * T * 4 + 2 * 2 * B * T * 4


@pytest.mark.parametrize("precision", ["fp32", "amp"])
@pytest.mark.parametrize("d_ff", [2 * D, 200])  # not the 4 d_model of GPT-2
def test_the_account_follows_the_mlp_width(precision, d_ff):
    def run(n_layers):
        cfg = GPTConfig(vocab_size=64, n_positions=T, d_model=D, n_layers=n_layers, n_heads=H, d_ff=d_ff)
        return measure_cpu_step(cfg, B, T, precision=precision)

    one, two = run(1), run(2)
    measured = two["activation_bytes_measured"] - one["activation_bytes_measured"]
    assert measured == (_accounted(two) - _accounted(one)) + (_left_out(two) - _left_out(one))


@pytest.mark.parametrize("checkpoint", [False, True])
def test_cpu_forward_is_the_account_the_left_out_rows_and_the_position_ids(checkpoint):
    # fp32 only: under CPU autocast cross-entropy saves fp32 log-probabilities (4 bytes per logit,
    # not the 6 of CUDA autocast that the account states); the H100 test below checks amp.
    run = _cpu_run("fp32", checkpoint, 2)
    rest = run["activation_bytes_measured"] - _accounted(run) - _left_out(run)
    assert 0 <= rest <= 8 * T + 64  # the int64 position ids (T of them) and a few scalars


def test_h100_forward_is_the_account_the_left_out_rows_and_the_position_ids():
    for name, run in _h100_runs().items():
        saved = run["phases"]["forward"]["breakdown"]["activations"]
        rest = saved - _accounted(run) - _left_out(run)
        assert 0 <= rest <= 8 * run["seq_len"] + 1024, (name, rest)  # positions and scalars
        assert rest < 1e-5 * saved


def test_forward_account_terms_by_hand():
    b, s, h, L, V = 3, 8, 16, 2, 50
    run = {"config": {"d_model": h, "n_layers": L, "vocab_size": V, "d_ff": None, "n_heads": 2},
           "batch": b, "seq_len": s, "precision": "amp", "checkpoint": False}
    sbh = s * b * h
    terms = forward_account(run)
    assert [v for _, v in terms] == [
        10 * sbh * L,  # q, k, v, the QKV input and the SDPA output, 2 bytes each
        18 * sbh * L,  # MLP: input (h), GELU input and output (4h each), 2 bytes each
        8 * sbh * L,  # two fp32 LayerNorm inputs
        2 * (L * (4 * h * h + 2 * h * 4 * h) + V * h),  # bf16 copies of every matmul weight
        (4 + 2) * sbh,  # final norm input (fp32), LM-head input (bf16)
        6 * b * s * V,  # bf16 log-softmax output and its fp32 copy
    ]
    assert terms[-1][0] == "cross-entropy (6 bytes per logit)"
    checkpointed = dict(forward_account({**run, "checkpoint": True, "precision": "fp32"}))
    assert sum(checkpointed.values()) == 4 * sbh * L + 8 * sbh + 4 * b * s * V  # no weight copies
    assert forward_left_out(run) == {"logsumexp_per_layer": b * 2 * s * 4,
                                     "layernorm_stats": (2 * L + 1) * b * s * 8,
                                     "token_ids": 2 * b * s * 8}


# --- saved tensors by module; what the loss saves -----------------------------------------------

def test_saved_tensors_by_module_is_the_block_account():
    from infralens.memory.measure import layer_saved_bytes, saved_tensors_by_module
    from infralens.models.gpt import GPT

    torch.manual_seed(0)
    cfg = tiny()
    model = GPT(cfg)
    x = torch.randint(0, cfg.vocab_size, (B, T))
    rows = saved_tensors_by_module(model, x, x)
    for layer in range(cfg.n_layers):
        got = sum(r["bytes"] for r in rows if r["module"].startswith(f"blocks.{layer}."))
        assert got == layer_saved_bytes(cfg, B, T, amp=False)["total"]


def _logit_bytes(saved: list[dict], rows: int, vocab: int) -> dict[str, int]:
    """Bytes per logit of the saved (rows, vocab) tensors, by dtype."""
    out: dict[str, int] = {}
    for r in saved:
        if r["shape"] == [rows, vocab]:
            out[r["dtype"]] = out.get(r["dtype"], 0) + r["bytes"] // (rows * vocab)
    return out


@pytest.mark.parametrize(
    ("kwargs", "per_logit"),
    [
        ({"dtype": torch.float32, "autocast": False}, {"float32": 4}),  # log-probs, shared with nll
        ({"autocast": True}, {"float32": 4}),  # CPU autocast runs cross_entropy_loss in fp32
        ({"autocast": True, "as_decomposed": True}, {"bfloat16": 2, "float32": 4}),  # CUDA's path
        ({"autocast": False}, {"bfloat16": 2}),  # bf16 logits, no autocast (a bf16 model)
    ],
    ids=["fp32", "cpu-autocast", "cuda-autocast-path", "bf16-model"],
)
def test_cross_entropy_saved(kwargs, per_logit):
    from infralens.memory.measure import cross_entropy_saved

    rows, vocab = 6, 10
    assert _logit_bytes(cross_entropy_saved(rows, vocab, **kwargs), rows, vocab) == per_logit


def test_cross_entropy_decomposed_is_the_op_without_autocast():
    """LossNLL.cpp's cross_entropy_loss is nll_loss(log_softmax(x, 1, x.dtype)): same losses."""
    import torch.nn.functional as F  # noqa: N812

    x = torch.randn(5, 7, dtype=torch.float64)
    y = torch.randint(0, 7, (5,))
    assert torch.equal(F.cross_entropy(x, y), F.nll_loss(torch.log_softmax(x, 1, dtype=x.dtype), y))


def test_cross_entropy_saved_rejects_a_bad_size():
    from infralens.memory.measure import cross_entropy_saved

    with pytest.raises(ValueError, match="vocab must be a positive integer"):
        cross_entropy_saved(4, 0)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_ddp_gradients_leave_the_buckets_under_no_sync_after_set_to_none(set_to_none):
    """reducer.cpp: with .grad set to None, AccumulateGrad allocates a fresh gradient that the
    Reducer copies into its bucket view only in a synchronized backward; under no_sync it stays
    outside, beside the buckets. With set_to_none=False the views survive and accumulate."""
    from infralens.memory.measure import ddp_gradient_bytes
    from infralens.models.gpt import GPT

    torch.manual_seed(0)
    cfg = tiny(n_layers=1)
    model = GPT(cfg)
    x = torch.randint(0, cfg.vocab_size, (B, T))
    grads = 4 * model.num_params()  # fp32, the tied weight once
    got = {r["phase"].split(",")[0]: r for r in ddp_gradient_bytes(model, x, x, set_to_none=set_to_none)}
    assert all(r["bucket_bytes"] == grads for r in got.values())
    assert got["synchronized backward"] == {"phase": "synchronized backward", "bucket_bytes": grads,
                                            "grad_in_buckets": grads, "grad_outside": 0}
    no_sync = got["backward under no_sync"]
    if set_to_none:  # 4 bytes of gradient outside the buckets on top of their 4: 8 per parameter
        assert (no_sync["grad_in_buckets"], no_sync["grad_outside"]) == (0, grads)
        assert (got["step"]["grad_in_buckets"], got["step"]["grad_outside"]) == (0, 0)
    else:  # zeroed in place: the views stay and no_sync accumulates inside the buckets
        assert (no_sync["grad_in_buckets"], no_sync["grad_outside"]) == (grads, 0)
        assert got["step"]["grad_in_buckets"] == grads


# --- saved_bytes: what one call saves, against derivatives.yaml ---------------------------------

def test_saved_bytes_of_mm_is_what_each_gradient_needs():
    a = torch.randn(8, 4, requires_grad=True)
    b = torch.randn(4, 6, requires_grad=True)
    c = torch.randn(4, 6)
    # d/da = grad @ b.T needs b, d/db = a.T @ grad needs a: each is saved only if the other needs grad
    assert saved_bytes(torch.mm, a, b) == 4 * (8 * 4 + 4 * 6)
    assert saved_bytes(torch.mm, a, c) == 4 * 4 * 6
    assert saved_bytes(torch.mm, c.T, c) == 0  # nothing requires grad: nothing recorded


def test_saved_bytes_counts_a_shared_storage_once():
    x = torch.randn(16, 8, dtype=torch.float64, requires_grad=True)
    # two views of x saved: one storage, all of it
    assert saved_bytes(lambda t: t[:, :4] * t[:, 4:], x) == 8 * 16 * 8
    # exp saves its result, a new storage of x's size
    assert saved_bytes(torch.exp, x) == x.untyped_storage().nbytes()


def test_saved_bytes_passes_keyword_arguments():
    x = torch.randn(3, 4, requires_grad=True)
    w, b = torch.randn(5, 4, requires_grad=True), torch.randn(5, requires_grad=True)
    # linear = addmm(b, x, w.T): saves x and the transposed view of w (w's storage); b needs nothing
    assert saved_bytes(F.linear, x, weight=w, bias=b) == 4 * (3 * 4 + 5 * 4)
