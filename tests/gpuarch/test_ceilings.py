"""The ceiling measurements, run on the CPU with tiny sizes: the same code as the GPU cell."""

from __future__ import annotations

import json

import pytest

from infralens.gpuarch.ceilings import (
    measure_add,
    measure_ceilings,
    measure_matmul,
    measured_roof,
    points_of,
    sm_clock_under_load,
)
from infralens.gpuarch.roofline import gemm_intensity


def test_matmul_result_is_consistent():
    r = measure_matmul(64, 48, 32, device="cpu", dtype="float32", rep_ms=5)
    assert r["flops_per_s"] == pytest.approx(2 * 64 * 48 * 32 / (r["ms"] * 1e-3))
    assert r["intensity"] == pytest.approx(gemm_intensity(64, 48, 32, 4))


def test_add_intensity_is_one_flop_per_three_elements():
    r = measure_add(4096, device="cpu", dtype="float32", rep_ms=5)
    assert r["intensity"] == pytest.approx(1 / 12)
    assert r["bytes_per_s"] == pytest.approx(12 * r["flops_per_s"])


def test_ceilings_on_cpu_are_json_and_plottable():
    res = measure_ceilings(device="cpu", n=64, copy_bytes=1 << 16, sweep=(1, 8, 64),
                           add_elements=4096, rep_ms=5)
    json.dumps(res, allow_nan=False)
    assert res["clocks"] is None  # no nvidia-smi reading on the CPU
    assert [r["m"] for r in res["sweep"]] == [1, 8, 64]
    roof = measured_roof(res)
    assert roof.peak_flops == res["matmul"]["flops_per_s"]
    assert roof.bandwidth == res["copy_bytes_per_s"]
    pts = points_of(res)
    assert len(pts) == 4 and pts[-1].label == "add"


def test_clock_reading_needs_cuda():
    assert sm_clock_under_load(device="cpu") is None
