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


# Clock and power sampled through every timing (the CPU stands in; a fake reader stands in for NVML).

from infralens.gpuarch.ceilings import (  # noqa: E402
    Sampler,
    default_reader,
    matmul_with_telemetry,
    measure_with_telemetry,
)


class FakeReader:
    """Readings whose clock counts up, so that each timing's samples are its own."""

    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1
        if self.calls % 5 == 0:
            return None  # a failed reading is skipped, not recorded
        return {"sm_clock_mhz": 1000.0 + self.calls, "power_w": 300.0 + self.calls}


def test_sampler_keeps_timed_readings_and_stops():
    import time

    fake = FakeReader()
    with Sampler(fake, interval_s=0.001) as s:
        t0 = time.perf_counter()
        time.sleep(0.03)
        t1 = time.perf_counter()
    assert not s._thread.is_alive()
    inside = s.between(t0, t1)
    assert inside and len(inside) < len(s.samples) + 1
    assert all(r is not None for _, r in s.samples)
    clocks = [r["sm_clock_mhz"] for _, r in s.samples]
    assert clocks == sorted(clocks)
    with pytest.raises(ValueError):
        Sampler(fake, interval_s=0)


def test_telemetry_attaches_each_timing_its_own_samples():
    res = matmul_with_telemetry(48, repeats=3, device="cpu", dtype="float32", read=FakeReader(),
                                interval_s=0.001, rep_ms=20)
    json.dumps(res, allow_nan=False)
    assert len(res["runs"]) == 3
    highs = []
    for run in res["runs"]:
        assert run["flops_per_s"] == pytest.approx(2 * 48**3 / (run["ms"] * 1e-3))
        c = run["sm_clock_mhz"]
        assert c["n"] >= 1 and c["min"] <= c["median"] <= c["max"]
        highs.append(c["max"])
    assert highs == sorted(highs)  # later timings saw later (higher) readings
    rates = res["flops_per_s"]
    assert rates["min"] <= rates["median"] <= rates["max"]
    assert res["spread"] == pytest.approx((rates["max"] - rates["min"]) / rates["median"])
    assert res["sm_clock_mhz"]["n"] >= sum(r["sm_clock_mhz"]["n"] for r in res["runs"])


def test_telemetry_without_a_reader_still_times():
    res = measure_with_telemetry(lambda: sum(range(1000)), 1000.0, repeats=2, read=None,
                                 device="cpu", rep_ms=5)
    assert res["sm_clock_mhz"] is None and all(r["power_w"] is None for r in res["runs"])
    assert default_reader("cpu") is None
    with pytest.raises(ValueError):
        measure_with_telemetry(lambda: None, 1.0, repeats=0, device="cpu")
