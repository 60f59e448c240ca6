"""Training and inference ledgers: bytes per parameter, the ZeRO example, whole-model sums."""

from __future__ import annotations

import pytest

from infralens.memory import (
    NOT_IN_LEDGER,
    activation_bytes_per_layer,
    inference_ledger,
    training_estimate,
    training_ledger,
)
from infralens.models import shipped_config

BYTES_PER_PARAM = {
    ("sgd", "fp32"): 8, ("sgd_momentum", "fp32"): 12, ("adamw", "fp32"): 16,
    ("sgd", "mixed"): 8, ("sgd_momentum", "mixed"): 12, ("adamw", "mixed"): 16,
    ("sgd", "amp"): 8, ("sgd_momentum", "amp"): 12, ("adamw", "amp"): 16,
}


@pytest.mark.parametrize(("optimizer", "precision"), BYTES_PER_PARAM)
def test_bytes_per_param(optimizer, precision):
    ledger = training_ledger(1000, optimizer, precision)
    assert ledger.bytes_per_param == BYTES_PER_PARAM[(optimizer, precision)]
    assert ledger.total == 1000 * ledger.bytes_per_param


def test_zero_paper_example():
    # Rajbhandari et al. (ZeRO): Psi = 7.5B, mixed-precision Adam -> (2 + 2 + 12) Psi = 120 GB.
    psi = 7_500_000_000
    ledger = training_ledger(psi, "adamw", "mixed")
    assert (ledger.weights, ledger.gradients) == (2 * psi, 2 * psi)
    assert ledger.master_weights + ledger.optimizer_states == 12 * psi
    assert ledger.total == 120 * 10**9


def test_amp_keeps_fp32_weights_and_grads_without_a_master_copy():
    ledger = training_ledger(10, "adamw", "amp")
    assert (ledger.weights, ledger.gradients, ledger.master_weights,
            ledger.optimizer_states) == (40, 40, 0, 80)


def test_rows_end_with_total():
    rows = training_ledger(10, "sgd_momentum", "mixed").rows()
    assert rows[-1] == ("total", sum(n for _, n in rows[:-1])) == ("total", 120)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [((0, "adamw", "mixed"), "num_params"), ((10, "adam", "mixed"), "optimizer must be one of"),
     ((10, "adamw", "bf16"), "precision must be one of")],
)
def test_ledger_rejects_bad_inputs(args, fragment):
    with pytest.raises(ValueError, match=fragment):
        training_ledger(*args)


def test_training_estimate_adds_all_layers_activations():
    cfg = shipped_config("gpt2")
    est = training_estimate(cfg, batch=8, seq_len=1024, optimizer="adamw", precision="amp")
    per_layer = 1024 * 8 * 768 * 34 + 5 * 12 * 1024 * 1024 * 8
    assert est.activations_per_layer == per_layer
    assert est.activations == 12 * per_layer
    assert est.ledger.total == 16 * 124_439_808
    assert est.total == est.ledger.total + est.activations
    assert est.rows()[-1] == ("total", est.total)


def test_training_estimate_passes_parallelism_through():
    cfg = shipped_config("llama-2-7b")
    est = training_estimate(cfg, 1, 4096, t=8, sequence_parallel=True, recompute="selective")
    assert est.activations == 32 * activation_bytes_per_layer(
        4096, 1, 4096, 32, t=8, sequence_parallel=True, recompute="selective")


def test_inference_ledger_llama_3_8b():
    ledger = inference_ledger(shipped_config("llama-3-8b"), batch=1, seq_len=8192)
    assert ledger.weights == 2 * 8_030_261_248
    assert ledger.kv_cache == 2 * 32 * 1 * 8192 * 8 * 128 * 2  # 1 GiB
    assert ledger.total == ledger.weights + ledger.kv_cache
    fp8 = inference_ledger(shipped_config("llama-3-8b"), 1, 8192, weight_bytes_per_param=1,
                           kv_bytes_per_elem=1)
    assert (fp8.weights, fp8.kv_cache) == (ledger.weights // 2, ledger.kv_cache // 2)


def test_inference_ledger_rejects_bad_sizes():
    with pytest.raises(ValueError, match="seq_len"):
        inference_ledger(shipped_config("gpt2"), 1, 0)
    with pytest.raises(ValueError, match="weight_bytes_per_param"):
        inference_ledger(shipped_config("gpt2"), 1, 1, weight_bytes_per_param=0)


def test_ledger_says_what_it_leaves_out():
    text = " ".join(f"{item} {why}" for item, why in NOT_IN_LEDGER).lower()
    for topic in ("fragmentation", "cuda context", "communication", "temporary", "autocast",
                  "logits"):
        assert topic in text
