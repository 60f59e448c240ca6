"""The toy warp scheduler against its steady-state bound and a timeline drawn by hand."""

from __future__ import annotations

import pytest

from infralens.gpuarch.schedule import busy_fraction_bound, simulate


def test_toy_scheduler_matches_its_steady_state_bound():
    for warps in (1, 2, 3, 4, 6):
        s = simulate(warps, 2, 12, cycles=2000)
        assert s.busy == pytest.approx(busy_fraction_bound(warps, 2, 12), abs=0.02)
    full = simulate(8, 2, 12, cycles=2000)
    assert full.busy > 0.98 and busy_fraction_bound(8, 2, 12) == 1.0
    one = simulate(1, 2, 12, cycles=28)
    assert one.timeline[0] == "CCL" + "." * 11 + "CCL" + "." * 11
    assert "warp 0" in one.ascii()
    with pytest.raises(ValueError):
        simulate(0, 2, 12)


@pytest.mark.parametrize("warps, compute, latency", [(1, 1, 1), (3, 2, 12), (5, 4, 20), (16, 1, 8)])
def test_one_issue_per_cycle_and_every_warp_runs_its_loop(warps, compute, latency):
    s = simulate(warps, compute, latency, cycles=300)
    columns = list(zip(*s.timeline, strict=True))
    assert all(sum(ch != "." for ch in col) <= 1 for col in columns)  # one scheduler
    assert s.issued == sum(ch != "." for row in s.timeline for ch in row)
    for row in s.timeline:  # each warp: `compute` arithmetic instructions, then its load
        issued = row.replace(".", "")
        assert issued, row
        body = issued[: len(issued) - len(issued) % (compute + 1)]
        assert body == ("C" * compute + "L") * (len(body) // (compute + 1))
        for load in (i for i, ch in enumerate(row) if ch == "L"):  # nothing until the data is back
            assert set(row[load + 1: load + latency]) <= {"."}
