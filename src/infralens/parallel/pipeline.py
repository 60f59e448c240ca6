"""Pipeline schedules: the bubble formula, and a simulator that draws each schedule's timeline.

``p`` stages each hold a slice of the layers; a batch is split into ``m`` micro-batches. A
stage runs a micro-batch's forward (F) when the previous stage has sent its activations, and
its backward (B) when the next stage has sent the gradient. With every F taking ``t_f`` and
every B ``t_b`` on every stage, GPipe (all forwards, then all backwards; Huang et al. 2019) and
1F1B (PipeDream-Flush: after a warm-up, one forward then one backward; Narayanan et al. 2021)
both finish after ``(m + p - 1)(t_f + t_b)``: each stage idles ``(p-1)(t_f + t_b)``, the
*bubble*, against ``m(t_f + t_b)`` of work. 1F1B keeps at most ``p`` micro-batches' activations
on a stage where GPipe keeps ``m``. The interleaved schedule gives each stage ``v`` chunks of
``L/(pv)`` layers (virtual stages ``c·p + s``); each chunk's F and B take ``1/v`` as long and
the bubble shrinks ``v`` times, for ``v`` times more point-to-point messages.

Zero-bubble schedules (Qi et al. 2024) split the backward into B, the input gradient the
previous stage waits for, and W, the weight gradient nobody waits for. ``"zb-h1"`` here is 1F1B's
order with B and W split and each stage ``s`` deferring up to ``min(s+1, p-1)`` Ws, which run in
the cool-down while the stage waits for the next B. It reaches the paper's ZB-H1 bubble,
``(p-1)(t_f + t_b - t_w)``, when ``m >= p`` and ``t_w <= min(t_f, t_b)`` (not beyond); counted
until their W, all its stages but the last hold one micro-batch more than 1F1B's first stage
(that extra one needs only what its W reads).

The simulator is exact for the model it states (fixed op times, no communication time); it
does not model communication, unequal stages or the optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from infralens.tools.checks import require_positive

__all__ = ["SCHEDULES", "Op", "Timeline", "pipeline_bubble", "schedule_order", "simulate"]

SCHEDULES: tuple[str, ...] = ("naive", "gpipe", "1f1b", "interleaved", "zb-h1")


# [parallel:pipeline-bubble]
def pipeline_bubble(p: int, m: int, v: int = 1) -> float:
    """Bubble time over ideal compute time: ``(p-1)/m`` for GPipe and 1F1B (Narayanan et al.
    2021, section 2.2.1), ``(p-1)/(v·m)`` for the interleaved schedule with ``v`` chunks per stage.
    """
    require_positive(p=p, m=m, v=v)
    return float(Fraction(p - 1, v * m))
# [/parallel:pipeline-bubble]


@dataclass(frozen=True)
class Op:
    """One pass of one micro-batch through one chunk of one stage, placed in time."""

    stage: int
    kind: str  # "F", "B" (the whole backward, or its input-gradient part in zb-h1), "W"
    microbatch: int
    chunk: int
    start: float
    end: float


@dataclass(frozen=True)
class Timeline:
    """A simulated schedule: every op, and what the page reads off them."""

    schedule: str
    p: int
    m: int
    v: int
    ops: tuple[Op, ...]

    @property
    def makespan(self) -> float:
        return max(op.end for op in self.ops)

    def busy(self, stage: int) -> float:
        return sum(op.end - op.start for op in self.ops if op.stage == stage)

    @property
    def bubble(self) -> float:
        """Idle time of the busiest stage over its compute time: the quantity of
        :func:`pipeline_bubble`."""
        work = max(self.busy(s) for s in range(self.p))
        return (self.makespan - work) / work

    def peak_in_flight(self, stage: int) -> int:
        """Most micro-batch chunks whose forward has started on ``stage`` and whose last backward
        pass (B, or W where the backward is split) has not finished: what the stage holds at its
        peak."""
        last = "W" if any(op.kind == "W" for op in self.ops) else "B"
        events = sorted((op.start if op.kind == "F" else op.end, op.kind == "F")
                        for op in self.ops if op.stage == stage and op.kind in ("F", last))
        held = peak = 0
        for _, is_forward in events:  # a release at time t sorts before a forward starting at t
            held += 1 if is_forward else -1
            peak = max(peak, held)
        return peak


def _interleaved_id(k: int, p: int, v: int, forward: bool) -> tuple[int, int]:
    """Megatron-LM's order for the interleaved schedule: the ``k``-th forward (or backward) of a
    stage is micro-batch ``(k // pv)·p + k % p`` on chunk ``(k % pv) // p`` (backwards: reversed)."""
    in_group = k % (p * v)
    chunk = in_group // p
    return (k // (p * v)) * p + in_group % p, chunk if forward else v - 1 - chunk


def schedule_order(schedule: str, p: int, m: int, v: int = 1) -> list[list[tuple[str, int, int]]]:
    """Each stage's ops in the order it runs them, as ``(kind, microbatch, chunk)``."""
    _check(schedule, p, m, v)
    orders = []
    for s in range(p):
        if schedule == "zb-h1":
            orders.append(_zb_h1_order(s, p, m))
            continue
        if schedule == "naive":  # one micro-batch at a time through the whole pipeline
            order = [op for i in range(m) for op in (("F", i, 0), ("B", i, 0))]
        elif schedule == "gpipe":
            order = [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
        elif schedule == "1f1b":
            warm = min(p - s - 1, m)
            order = [("F", i, 0) for i in range(warm)]
            for i in range(m - warm):
                order += [("F", warm + i, 0), ("B", i, 0)]
            order += [("B", i, 0) for i in range(m - warm, m)]
        else:  # interleaved
            total = m * v
            warm = min((p - s - 1) * 2 + (v - 1) * p, total)
            fwd = [("F", *_interleaved_id(k, p, v, True)) for k in range(total)]
            bwd = [("B", *_interleaved_id(k, p, v, False)) for k in range(total)]
            order = fwd[:warm]
            for i in range(total - warm):
                order += [fwd[warm + i], bwd[i]]
            order += bwd[total - warm:]
        orders.append(order)
    return orders


def _zb_h1_order(s: int, p: int, m: int) -> list[tuple[str, int, int]]:
    """1F1B's order with each backward split into B and W, up to ``min(s+1, p-1)`` Ws deferred."""
    lag = min(s + 1, p - 1)
    warm = min(p - s - 1, m)
    order = [("F", i, 0) for i in range(warm)]
    deferred: list[int] = []
    for i in range(m - warm):  # steady phase: F, B, and the Ws past the lag
        order += [("F", warm + i, 0), ("B", i, 0)]
        deferred.append(i)
        while len(deferred) > lag:
            order.append(("W", deferred.pop(0), 0))
    for i in range(m - warm, m):  # cool-down: a deferred W fills the wait for each B
        if deferred:
            order.append(("W", deferred.pop(0), 0))
        order.append(("B", i, 0))
        deferred.append(i)
    return order + [("W", i, 0) for i in deferred]


def _check(schedule: str, p: int, m: int, v: int) -> None:
    require_positive(p=p, m=m, v=v)
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}; got {schedule!r}")
    if schedule == "interleaved" and m % p:
        raise ValueError(f"the interleaved schedule needs m ({m}) to be a multiple of p ({p})")
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v > 1 (chunks per stage) is the interleaved schedule's; {schedule} has v=1")


def simulate(schedule: str, p: int, m: int, v: int = 1, t_f: float = 1.0,
             t_b: float = 2.0, t_w: float = 0.0) -> Timeline:
    """Place every op of ``schedule`` in time; ``t_f``, ``t_b`` are one stage's F and B times for a
    micro-batch (a chunk takes ``1/v`` of them). For ``"zb-h1"`` ``t_b`` is the input-gradient
    part of the backward and ``t_w`` the weight-gradient part; the other schedules take
    ``t_w = 0``. Each op starts as soon as its stage is free and its input has arrived
    (communication takes no time)."""
    _check(schedule, p, m, v)
    if not (t_f > 0 and t_b > 0 and t_w >= 0):
        raise ValueError("t_f and t_b must be positive and t_w non-negative")
    if (schedule == "zb-h1") != (t_w > 0):
        raise ValueError("zb-h1 needs the weight-gradient time t_w > 0; the other schedules t_w = 0")
    n_virtual = p * v
    duration = {"F": t_f / v, "B": t_b / v, "W": t_w / v}
    done: dict[tuple[str, int, int], float] = {}  # (kind, microbatch, virtual stage) -> end time

    def deps(kind: str, i: int, vs: int) -> list[tuple[str, int, int]]:
        if kind == "F":
            return [("F", i, vs - 1)] if vs else []
        if kind == "B":
            return [("B", i, vs + 1)] if vs < n_virtual - 1 else [("F", i, vs)]
        return [("B", i, vs)]  # W: after this stage's B

    choose = _fixed_order_policy(schedule_order(schedule, p, m, v))

    ops: list[Op] = []
    free = [0.0] * p  # when each stage finishes its current op
    clock = 0.0
    total = (3 if schedule == "zb-h1" else 2) * p * m * v
    while len(ops) < total:
        for s in range(p):
            if free[s] > clock:
                continue

            def ready(kind: str, i: int, c: int, s: int = s, now: float = clock) -> bool:
                return all(done.get(d, float("inf")) <= now for d in deps(kind, i, c * p + s))

            picked = choose(s, ready)
            if picked is None:
                continue
            kind, i, c = picked
            start, end = clock, clock + duration[kind]
            done[(kind, i, c * p + s)] = end
            free[s] = end
            ops.append(Op(s, kind, i, c, start, end))
        upcoming = [t for t in free if t > clock] + [t for t in done.values() if t > clock]
        if not upcoming and len(ops) < total:
            raise RuntimeError(f"{schedule}: the op order deadlocks")  # a bug in an order above
        clock = min(upcoming) if upcoming else clock
    return Timeline(schedule, p, m, v, tuple(sorted(ops, key=lambda o: (o.stage, o.start))))


def _fixed_order_policy(orders: list[list[tuple[str, int, int]]]) -> Callable:
    position = [0] * len(orders)

    def choose(s: int, ready: Callable[..., bool]) -> tuple[str, int, int] | None:
        if position[s] < len(orders[s]) and ready(*orders[s][position[s]]):
            position[s] += 1
            return orders[s][position[s] - 1]
        return None
    return choose


def plot_timelines(timelines: dict[str, Timeline], unit: str = "a forward = 1, a backward = 2"):
    """One row of bars per stage for each timeline (forwards blue, backwards orange, weight
    gradients green where the backward is split, the
    micro-batch written on each bar, later chunks shaded lighter): a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(timelines), 1, figsize=(8, 1.55 * len(timelines)), sharex=True,
                             squeeze=False)
    for ax, (name, t) in zip(axes[:, 0], timelines.items(), strict=True):
        for op in t.ops:
            shade = 1.0 - 0.55 * op.chunk / (t.v - 1) if t.v > 1 else 1.0
            ax.barh(op.stage, op.end - op.start, left=op.start, alpha=shade, edgecolor="white",
                    linewidth=0.5, color={"F": "tab:blue", "B": "tab:orange", "W": "tab:green"}[op.kind])
            ax.text((op.start + op.end) / 2, op.stage, str(op.microbatch), ha="center", va="center",
                    fontsize=6)
        ax.set_yticks(range(t.p), [f"stage {s}" for s in range(t.p)], fontsize=7)
        ax.invert_yaxis()
        ax.set_title(name, fontsize=8, loc="left")
    axes[-1, 0].set_xlabel(f"time ({unit})")
    fig.tight_layout()
    return fig
