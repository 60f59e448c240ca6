"""Lab 03's overlap analysis: interval arithmetic, a synthetic profiler trace with known answers,
and the measurement itself run end to end on two CPU ranks (where there are no GPU kernels)."""

from __future__ import annotations

import json

import pytest
import torch

from infralens.training.ddp_overlap import analyze_trace, intersection, length, union
from infralens.training.launch import torchrun


def test_intervals():
    assert union([(5, 7), (0, 2), (1, 3), (7, 8), (9, 9)]) == [(0, 3), (5, 8)]
    assert length([(0, 2), (1, 3)]) == 3
    assert intersection([(0, 10)], [(2, 3), (5, 7), (9, 12)]) == [(2, 3), (5, 7), (9, 10)]
    assert intersection([(0, 1)], [(1, 2)]) == []


def kernel(name, ts, dur, corr, stream=7):
    return {"ph": "X", "cat": "kernel", "name": name, "ts": ts, "dur": dur,
            "args": {"correlation": corr, "stream": stream}}


def launch(ts, corr):
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 1,
            "args": {"correlation": corr}}


def synthetic_step(t0: float) -> list[dict]:
    """One step: forward kernels 0-100, backward kernels 100-300, two all-reduces on another
    stream, one during backward (150-200) and one after it (300-340), then the optimizer."""
    ev = [{"ph": "X", "cat": "user_annotation", "name": "lab03:forward", "ts": t0, "dur": 50},
          {"ph": "X", "cat": "user_annotation", "name": "lab03:backward", "ts": t0 + 50, "dur": 60},
          {"ph": "X", "cat": "gpu_user_annotation", "name": "lab03:backward", "ts": t0, "dur": 999}]
    ev += [launch(t0 + 10, 1), kernel("ampere_sgemm_fwd", t0 + 0, 100, 1)]
    ev += [launch(t0 + 60, 2), kernel("sm90_gemm_bwd", t0 + 100, 200, 2)]
    ev += [launch(t0 + 70, 3), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 150, 50, 3, 20)]
    ev += [launch(t0 + 105, 4), kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", t0 + 300, 40, 4, 20)]
    ev += [launch(t0 + 120, 5), kernel("adam_kernel", t0 + 340, 30, 5)]
    return ev


def test_analysis_of_a_known_trace():
    trace = {"traceEvents": synthetic_step(0) + synthetic_step(1000)}
    got = analyze_trace(trace, steps=2)
    assert got["allreduce_s"] == pytest.approx(90e-6)
    assert got["backward_compute_s"] == pytest.approx(200e-6)
    assert got["overlap_backward_s"] == pytest.approx(50e-6)
    assert got["exposed_s"] == pytest.approx(40e-6)
    assert got["overlap_fraction"] == pytest.approx(50 / 90)
    assert got["nccl_kernels_per_step"] == 2


def test_the_measurement_runs_on_cpu_ranks(tmp_path):
    out = tmp_path / "overlap.json"
    done = torchrun("infralens.training.ddp_overlap", ["--steps", "2", "--warmup", "2", "--out", str(out)],
                    nproc=2, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["world"] == 2 and got["backend"] == "gloo" and set(got["runs"]) == {"default", "one-bucket"}
    for run in got["runs"].values():
        assert run["step_s"] > 0 and run["no_sync_step_s"] > 0
        assert run["profile"]["nccl_kernels_per_step"] == 0  # no GPU kernels on the CPU
        assert len(run["profile_by_rank"]) == 2
    assert got["allreduce_alone"]["bytes"] == 4 * got["num_params"]


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="this machine has two GPUs")
def test_cuda_asked_for_without_gpus_fails_in_one_line():
    done = torchrun("infralens.training.ddp_overlap", ["--device", "cuda"], nproc=1, timeout=120)
    assert done.returncode != 0 and "has no GPU" in done.stderr


def _record_results():
    def run(step, no_sync, ranks):
        keys = ("backward_compute_s", "exposed_s", "compute_s", "allreduce_s")
        return {"step_s": step, "no_sync_step_s": no_sync,
                "profile_by_rank": [dict(zip(keys, rank, strict=True)) for rank in ranks]}
    default = run(0.111, 0.097, [(0.054, 0.013, 0.110, 0.057), (0.051, 0.007, 0.103, 0.021)])
    one = run(0.115, 0.097, [(0.045, 0.015, 0.098, 0.015), (0.045, 0.014, 0.097, 0.014)])
    return {"runs": {"default": default, "one-bucket": one}}


def test_timed_price_reads_only_the_step_times():
    from infralens.training.ddp_overlap import timed_price

    t = timed_price(_record_results())
    assert t == pytest.approx({"cost": 0.014, "one_cost": 0.018, "gain": 0.004})


def test_profiled_parts_are_per_rank_differences_and_sums():
    from infralens.training.ddp_overlap import profiled_parts

    p = profiled_parts(_record_results())
    assert p["slowdown"] == pytest.approx([0.009, 0.006])
    assert p["busy"] == pytest.approx([0.123, 0.110]) and p["one_busy"] == pytest.approx([0.113, 0.111])
    assert p["exposed"] == [0.013, 0.007] and p["one_exposed"] == [0.015, 0.014]
    assert p["allreduce"] == [0.057, 0.021]
