"""The profiler readings: interval arithmetic checked by hand, and a CPU step read end to end."""

import pytest

from infralens.models.gpt import GPTConfig
from infralens.profiling.trace import idle_gaps, profile_step


def test_idle_gaps_merges_overlaps_and_clips_to_the_window():
    busy, idle = idle_gaps([(0, 4), (2, 6), (8, 9), (12, 20)], 1, 15)
    assert busy == (6 - 1) + (9 - 8) + (15 - 12)
    assert idle == 14 - busy
    assert idle_gaps([], 0, 10) == (0.0, 10.0)


def test_cpu_step_readings():
    cfg = GPTConfig(vocab_size=128, n_positions=32, d_model=32, n_layers=2, n_heads=4)
    p = profile_step(cfg, 2, 32, warmup=1)
    assert p.device == "cpu" and p.launches == 0 and p.kernel_us == 0
    assert 0 < p.busy_us <= p.step_us and p.gaps_us == pytest.approx(p.step_us - p.busy_us)
    names = [r["name"] for r in p.top]
    assert any(n in names for n in ("aten::mm", "aten::addmm", "aten::bmm"))  # the matmuls show up
    assert all(r["self_us"] >= 0 and r["count"] >= 1 for r in p.top)
    assert p.top == sorted(p.top, key=lambda r: -r["self_us"])
    assert p.host_us == pytest.approx(p.step_us)  # on the CPU the window is the step's range


def test_unprofiled_step_time():
    from infralens.profiling.trace import time_step

    cfg = GPTConfig(vocab_size=128, n_positions=32, d_model=32, n_layers=1, n_heads=4)
    assert 0 < time_step(cfg, 1, 16, device="cpu", steps=2, amp=False) < 10
