"""The timing harness on the CPU: a function that sleeps a known time, and its arguments checked."""

import time

import pytest

from infralens.tools import bench as tb


def test_bench_returns_positive_milliseconds():
    # (moved from the ceilings tests: gpuarch.ceilings.bench_ms became tools.bench.bench_ms)
    assert tb.bench_ms(lambda: sum(range(1000)), device="cpu", rep_ms=5) > 0


def test_median_of_a_known_sleep():
    calls = []

    def sleep_2ms():
        calls.append(1)
        time.sleep(0.002)

    res = tb.bench(sleep_2ms, device="cpu", rep_ms=60)
    # time.sleep sleeps at least as long as asked; a loaded machine adds a little, rarely 1 ms.
    assert 2.0 <= res["ms"] < 4.0, res
    assert res["ms_q20"] <= res["ms"] <= res["ms_q80"]
    assert res["ms_q20"] >= 2.0
    assert res["reps"] >= 10 and len(calls) == res["reps"] + 1  # the first call is not timed
    assert set(res) == {"ms", "ms_q20", "ms_q80", "reps"}


def test_a_slow_function_still_gets_min_reps():
    res = tb.bench(lambda: time.sleep(0.003), device="cpu", min_reps=4, rep_ms=1)
    assert res["reps"] == 4  # the time budget ran out after the first timed call
    res = tb.bench(lambda: None, device="cpu", min_reps=1, rep_ms=20)
    assert res["reps"] > 100  # a fast one repeats until the budget is spent


def test_bench_ms_is_the_median_and_two_sleeps_compare():
    short = tb.bench_ms(lambda: time.sleep(0.001), device="cpu", rep_ms=30)
    long = tb.bench_ms(lambda: time.sleep(0.004), device="cpu", rep_ms=30)
    assert long - short == pytest.approx(3.0, abs=1.0)


@pytest.mark.parametrize("kwargs", [{"min_reps": 0}, {"rep_ms": 0}, {"rep_ms": -5}, {"warmup_ms": -1}])
def test_bad_arguments_are_refused_before_any_call(kwargs):
    calls = []
    with pytest.raises(ValueError, match="min_reps must be >= 1"):
        tb.bench(lambda: calls.append(1), device="cpu", **kwargs)
    assert calls == []


def test_an_unknown_flush_is_refused_before_any_call():
    calls = []
    with pytest.raises(ValueError, match="flush must be 'zero' or 'read'"):
        tb.bench(lambda: calls.append(1), device="cpu", flush="write")
    assert calls == []


def test_median_and_quantiles_by_hand():
    assert tb.median([5.0, 1.0, 3.0]) == 3.0 and tb.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    times = [float(x) for x in range(10, 0, -1)]  # 10 .. 1
    assert tb._quantile(times, 0.2) == 3.0 and tb._quantile(times, 0.8) == 9.0


def test_cuda_timer_passes_its_budget_to_bench_ms(monkeypatch):
    seen = []
    monkeypatch.setattr(tb, "bench_ms", lambda fn, **kw: seen.append(kw) or 1.5)
    timer = tb.cuda_timer(warmup_ms=5, rep_ms=40)
    assert timer(lambda: None) == 1.5
    assert seen == [{"warmup_ms": 5, "rep_ms": 40}]  # the default device, cuda


def test_bench_host_divides_a_sample_of_launches_and_one_wait():
    launches, waits = [], []

    def launch():
        launches.append(1)
        time.sleep(0.001)
        return len(launches)

    def wait(last):
        waits.append(last)
        time.sleep(0.004)  # one wait per sample, however many launches it follows

    res = tb.bench_host(launch, wait, per_sample=4, rep_ms=60)
    assert res["per_sample"] == 4 and set(res) == {"ms", "ms_q20", "ms_q80", "reps", "per_sample"}
    assert 2.0 <= res["ms"] < 3.5, res  # (4 x 1 ms + 4 ms) / 4, plus a little under load
    assert len(launches) == 4 * (res["reps"] + 1) and len(waits) == res["reps"] + 1
    assert waits[0] == 4  # the wait gets the last launch's result


def test_bench_host_refuses_an_empty_sample():
    with pytest.raises(ValueError):
        tb.bench_host(lambda: None, lambda _: None, per_sample=0)


def test_bench_graph_needs_cuda():
    import torch

    from infralens.tools.bench import bench_graph

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        bench_graph(lambda: None)
