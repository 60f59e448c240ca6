"""The determinism probes on the CPU at small sizes: bit-pattern counting and their bookkeeping."""

from __future__ import annotations

import itertools

import torch

from infralens.numerics.determinism import atomic_add_patterns, batch_invariance, distinct_results


def test_distinct_results_counts_bit_patterns():
    values = itertools.cycle([torch.tensor([1.0]), torch.tensor([1.0]), torch.tensor([-0.0]),
                              torch.tensor([0.0])])
    assert distinct_results(lambda: next(values), runs=4) == 3   # -0.0 and 0.0 differ in bits


def test_atomic_add_patterns_on_cpu_are_deterministic():
    out = atomic_add_patterns(n=1 << 12, bins=16, runs=3, device="cpu")
    assert out["index_add"] == out["index_add_deterministic"] == out["sum"] == 1
    assert not torch.are_deterministic_algorithms_enabled()


def test_batch_invariance_rows():
    res = batch_invariance(k=64, n=32, batches=(1, 4), device="cpu")
    assert [r["m"] for r in res["rows"]] == [1, 4]
    assert res["rows"][0]["differ"] == 0 and res["rows"][0]["max_rel"] == 0
