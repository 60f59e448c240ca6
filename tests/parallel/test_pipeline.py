"""The simulated schedules against the bubble formulas and the activation counts they imply."""

import pytest

from infralens.parallel import pipeline_bubble
from infralens.parallel.pipeline import schedule_order, simulate

GRID = [(2, 2), (2, 6), (4, 4), (4, 8), (4, 12), (8, 16), (3, 7)]


@pytest.mark.parametrize("p,m", GRID)
@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("t_f,t_b", [(1.0, 2.0), (1.0, 1.0), (0.5, 1.5)])
def test_gpipe_and_1f1b_bubble(schedule, p, m, t_f, t_b):
    t = simulate(schedule, p, m, t_f=t_f, t_b=t_b)
    assert t.bubble == pytest.approx(pipeline_bubble(p, m))
    assert t.makespan == pytest.approx((m + p - 1) * (t_f + t_b))


@pytest.mark.parametrize("p,m,v", [(2, 4, 2), (4, 8, 2), (4, 8, 4), (4, 4, 2), (8, 16, 2), (3, 9, 3)])
def test_interleaved_bubble_and_first_stage_memory(p, m, v):
    t = simulate("interleaved", p, m, v)
    assert t.bubble == pytest.approx(pipeline_bubble(p, m, v))
    # Korthikanti et al.: the first stage holds 1 + (p-1)/(pv) times 1F1B's p micro-batches;
    # in chunks of 1/v stage each, p·v + p - 1 of them (all m·v when the warm-up covers the batch)
    assert t.peak_in_flight(0) == min(p * v + p - 1, m * v)


@pytest.mark.parametrize("p,m", GRID)
def test_memory_per_stage(p, m):
    one = simulate("1f1b", p, m)
    gpipe = simulate("gpipe", p, m)
    naive = simulate("naive", p, m)
    for s in range(p):
        assert one.peak_in_flight(s) == min(p - s, m)
        assert gpipe.peak_in_flight(s) == m
        assert naive.peak_in_flight(s) == 1
    assert naive.bubble == pytest.approx(p - 1)  # one micro-batch at a time: every stage waits


@pytest.mark.parametrize("schedule,v", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_every_op_waits_for_its_input(schedule, v):
    p, m = 4, 8
    t = simulate(schedule, p, m, v)
    end = {(op.kind, op.microbatch, op.chunk * p + op.stage): op.end for op in t.ops}
    for op in t.ops:
        vs = op.chunk * p + op.stage
        if op.kind == "F" and vs:
            assert op.start >= end[("F", op.microbatch, vs - 1)]
        if op.kind == "B":
            prev = ("B", op.microbatch, vs + 1) if vs < p * v - 1 else ("F", op.microbatch, vs)
            assert op.start >= end[prev]
    for s in range(p):  # a stage runs one op at a time
        ops = sorted((o for o in t.ops if o.stage == s), key=lambda o: o.start)
        assert all(a.end <= b.start for a, b in zip(ops, ops[1:], strict=False))
    assert len(t.ops) == 2 * p * m * v


@pytest.mark.parametrize("p,m", [(p, m) for p, m in GRID if m >= p])
@pytest.mark.parametrize("t_f,t_b,t_w", [(1.0, 1.0, 1.0), (1.0, 1.2, 0.8), (2.0, 1.0, 1.0), (1.0, 2.0, 0.5)])
def test_zero_bubble_h1_reaches_the_papers_bubble(p, m, t_f, t_b, t_w):
    zb = simulate("zb-h1", p, m, t_f=t_f, t_b=t_b, t_w=t_w)
    one = simulate("1f1b", p, m, t_f=t_f, t_b=t_b + t_w)  # the same work, backward not split
    work = m * (t_f + t_b + t_w)
    # Qi et al. (2024), Table 2: ZB-H1 (p-1)(T_F + T_B - T_W) against 1F1B's (p-1)(T_F + T_B + T_W)
    assert zb.makespan - work == pytest.approx((p - 1) * (t_f + t_b - t_w))
    assert one.makespan - work == pytest.approx((p - 1) * (t_f + t_b + t_w))
    assert max(zb.peak_in_flight(s) for s in range(p)) <= min(p + 1, m)


def test_zero_bubble_h1_outside_its_conditions_is_slower_than_the_formula():
    # a weight gradient longer than the forward: stage 0 idles (p-1) t_b before its first B
    p, m, t_f, t_b, t_w = 4, 8, 1.0, 1.0, 2.0
    zb = simulate("zb-h1", p, m, t_f=t_f, t_b=t_b, t_w=t_w)
    assert zb.makespan - m * (t_f + t_b + t_w) > (p - 1) * (t_f + t_b - t_w)
    end = {(o.kind, o.microbatch, o.stage): o.end for o in zb.ops}
    for o in zb.ops:  # every W after its own B; every B after the next stage's
        if o.kind == "W":
            assert o.start >= end[("B", o.microbatch, o.stage)]
        if o.kind == "B" and o.stage < p - 1:
            assert o.start >= end[("B", o.microbatch, o.stage + 1)]


def test_orders_and_bad_input():
    orders = schedule_order("1f1b", 4, 6)
    assert orders[3][:4] == [("F", 0, 0), ("B", 0, 0), ("F", 1, 0), ("B", 1, 0)]
    assert [k for k, *_ in orders[0][:4]] == ["F", "F", "F", "F"]
    with pytest.raises(ValueError):
        simulate("interleaved", 4, 6, 2)  # m must be a multiple of p
    with pytest.raises(ValueError):
        simulate("1f1b", 4, 8, v=2)
    with pytest.raises(ValueError):
        simulate("zero", 4, 8)
    assert [k for k, *_ in schedule_order("zb-h1", 2, 3)[1]] == ["F", "B", "F", "B", "W", "F", "B", "W", "W"]
    with pytest.raises(ValueError):
        pipeline_bubble(0, 8)
    with pytest.raises(ValueError):
        simulate("zb-h1", 4, 8)  # needs the weight-gradient time
    with pytest.raises(ValueError):
        simulate("1f1b", 4, 8, t_w=1.0)


def test_plot_draws_every_op():
    import matplotlib

    matplotlib.use("Agg")
    from infralens.parallel.pipeline import plot_timelines

    t = simulate("interleaved", 2, 4, 2)
    fig = plot_timelines({"a": t, "b": simulate("1f1b", 2, 4)})
    bars = [p for p in fig.axes[0].patches]
    assert len(bars) == len(t.ops) and len(fig.axes) == 2
