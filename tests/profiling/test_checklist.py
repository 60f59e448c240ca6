"""The checklist's branches, each driven by the metric it names."""

from infralens.profiling.checklist import SOL_LATENCY_BOUND, diagnose, stall_reasons

BUSY = {"gaps_us": 0.0, "step_us": 100.0, "host_us": 50.0, "launches": 10, "launch_cpu_us": 5.0,
        "kernel_us": 100.0}


def sol(compute, memory, dram, stalls=()):
    out = {"GPU Speed Of Light Throughput": {
        "Compute (SM) Throughput": {"value": compute, "unit": "%"},
        "Memory Throughput": {"value": memory, "unit": "%"},
        "DRAM Throughput": {"value": dram, "unit": "%"}}}
    out["Command line profiler metrics"] = {
        f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": {"value": v, "unit": "inst"}
        for r, v in stalls}
    return out


def test_host_bound_step():
    idle = {"gaps_us": 80.0, "step_us": 100.0, "host_us": 95.0, "launches": 10, "launch_cpu_us": 20.0,
            "kernel_us": 20.0}
    steps = diagnose(idle)
    assert steps[0].verdict.startswith("no") and "host-bound" in steps[1].verdict
    # two short kernels around a 50 ms wait inside the step: host time, so host-bound, and the
    # verdict points at the timeline to tell a wait from launch overhead
    sync = {"gaps_us": 50.0, "step_us": 52.0, "host_us": 51.0, "launches": 2, "launch_cpu_us": 0.02,
            "kernel_us": 2.0}
    assert "host-bound" in diagnose(sync)[1].verdict and "synchronizing" in diagnose(sync)[1].verdict
    # work issued elsewhere: the host's own range is short, the GPU still idles
    other = dict(sync, host_us=0.5)
    assert "outside" in diagnose(other)[1].verdict


def test_unit_verdicts():
    assert "DRAM-bound" in diagnose(BUSY, sol(11, 92, 92))[1].verdict
    gemm = diagnose(BUSY, sol(94, 95, 30))[1].verdict  # shared memory busy, DRAM not
    assert "balanced" in gemm and "on chip" in gemm
    assert "compute-bound" in diagnose(BUSY, sol(90, 40, 20))[1].verdict
    assert "on-chip" in diagnose(BUSY, sol(20, 90, 30))[1].verdict  # exercise 2's kernel
    assert "on-chip" in diagnose(BUSY, sol(65, 98, 30))[1].verdict
    low = diagnose(BUSY, sol(20, 30, 30, [("long_scoreboard", 5.0), ("selected", 1.0), ("wait", 2.0)]))
    assert "latency-bound" in low[1].verdict and low[2].value.startswith("long_scoreboard")
    # at a unit's peak the stalls are not read
    assert len(diagnose(BUSY, sol(94, 95, 30, [("long_scoreboard", 5.0)]))) == 2  # stalls not read
    assert SOL_LATENCY_BOUND == 0.60  # Nsight Compute's own rule


def test_stall_reasons_sorted():
    s = stall_reasons(sol(1, 1, 1, [("wait", 1.0), ("barrier", 3.0)]))
    assert list(s) == ["barrier", "wait"]
