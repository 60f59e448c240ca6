"""A toy warp scheduler: how many warps it takes to hide a load's latency.

One scheduler issues at most one instruction per cycle, from a warp that is ready: the one it
issued from last, while that one is ready, else the one that has waited longest (a
greedy-then-oldest policy, one of the simple policies GPU schedulers are modelled with). Each warp
runs the same loop: ``compute`` independent arithmetic instructions (one cycle each to issue),
then one load whose result the next iteration needs, ``latency`` cycles later. A warp alone
issues compute + 1 instructions every compute + latency cycles, so W warps keep the scheduler
busy a fraction min(1, W (compute + 1) / (compute + latency)) of the cycles once the pipeline is
full; the timeline shows why. This is Little's law for one scheduler: it needs about
(compute + latency) / (compute + 1) warps in flight to issue every cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Schedule", "simulate", "busy_fraction_bound"]


@dataclass(frozen=True)
class Schedule:
    warps: int
    compute: int
    latency: int
    cycles: int
    timeline: tuple[str, ...]   # per warp, one character per cycle: C issue, L load, . waiting
    issued: int                 # cycles in which some warp issued

    @property
    def busy(self) -> float:
        return self.issued / self.cycles

    def ascii(self) -> str:
        ruler = "".join(str(c // 10 % 10) if c % 10 == 0 else " " for c in range(self.cycles))
        rows = [f"cycle   {ruler}"] + [f"warp {w:<2} {row}" for w, row in enumerate(self.timeline)]
        return "\n".join(rows)


# [gpuarch:schedule]
def simulate(warps: int, compute: int, latency: int, cycles: int = 60) -> Schedule:
    """Greedy-then-oldest issue: keep issuing from the warp that issued last while it is ready,
    otherwise pick the ready warp that has waited longest. 'C' = arithmetic, 'L' = load."""
    if warps < 1 or compute < 1 or latency < 1 or cycles < 1:
        raise ValueError("warps, compute, latency and cycles must be >= 1")
    ready_at = [0] * warps             # cycle at which each warp may issue again
    left = [compute] * warps           # arithmetic instructions before its next load
    rows = [["."] * cycles for _ in range(warps)]
    issued, last = 0, None
    for t in range(cycles):
        candidates = [w for w in range(warps) if ready_at[w] <= t]
        if not candidates:
            continue
        w = last if last in candidates else min(candidates, key=lambda v: (ready_at[v], v))
        last = w
        issued += 1
        if left[w] > 0:                # an arithmetic instruction: ready again next cycle
            rows[w][t] = "C"
            left[w] -= 1
            ready_at[w] = t + 1
        else:                          # the load: the warp waits for its data
            rows[w][t] = "L"
            left[w] = compute
            ready_at[w] = t + latency
    return Schedule(warps, compute, latency, cycles, tuple("".join(r) for r in rows), issued)
# [/gpuarch:schedule]


def busy_fraction_bound(warps: int, compute: int, latency: int) -> float:
    """Steady-state fraction of cycles with an issue: each warp issues compute + 1 instructions
    per compute + latency cycles (its loop), and the scheduler issues at most one per cycle."""
    return min(1.0, warps * (compute + 1) / (compute + latency))
