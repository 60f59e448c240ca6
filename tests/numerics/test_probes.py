"""The GPU probes run on the CPU at small sizes: their bookkeeping against float64 references."""

from __future__ import annotations

import itertools

import pytest
import torch

from infralens.numerics.determinism import atomic_add_patterns, batch_invariance, distinct_results
from infralens.numerics.matmul_error import matmul_error_sweep
from infralens.numerics.summation import gamma


def test_matmul_error_sweep_on_cpu():
    res = matmul_error_sweep([64, 512], mn=16, modes=("fp32", "bf16", "bf16_f32out", "fp8"),
                             device="cpu")
    rows = {(r["mode"], r["k"]): r for r in res["rows"]}
    for k in (64, 512):
        assert rows["fp32", k]["max"] <= gamma(k, 2.0**-24)
        assert rows["bf16", k]["max"] <= 2.0**-8 * 1.01          # only the output rounding
        assert rows["bf16", k]["out_dtype"] == "bfloat16"
    assert "bf16_f32out" in res["skipped"] or ("bf16_f32out", 64) in rows
    with pytest.raises(ValueError, match="unknown mode"):
        matmul_error_sweep([16], mn=4, modes=("int3",), device="cpu")


def test_distinct_results_counts_bit_patterns():
    values = itertools.cycle([torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([-0.0]),
                              torch.tensor([0.0])])
    assert distinct_results(lambda: next(values), runs=4) == 3   # -0.0 and 0.0 differ in bits


def test_atomic_add_patterns_on_cpu_are_deterministic_and_correct():
    out = atomic_add_patterns(n=1 << 12, bins=16, runs=3, device="cpu")
    assert out["index_add"] == out["index_add_deterministic"] == out["sum"] == 1
    assert not torch.are_deterministic_algorithms_enabled()


def test_batch_invariance_rows():
    res = batch_invariance(k=64, n=32, batches=(1, 4), device="cpu")
    assert [r["m"] for r in res["rows"]] == [1, 4]
    assert res["rows"][0]["differ"] == 0 and res["rows"][0]["max_rel"] == 0
