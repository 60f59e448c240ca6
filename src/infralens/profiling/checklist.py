"""Lab 09's checklist, as a decision procedure: each question names the metric that answers it.

:func:`diagnose` walks the questions in order for one profiled step and, for its top kernel,
Nsight Compute's sections, and returns every step it took: the question, the metric and its
value, and the verdict. Thresholds are the ones Nsight Compute's own rules use where it has one
(below 60% of peak for both compute and memory throughput: latency-bound) and are marked as
this book's choice where it has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Nsight Compute's Speed Of Light rule: compute and memory throughput both below this share of
#: peak "typically indicate latency issues".
SOL_LATENCY_BOUND = 0.60
#: This book's choice: a GPU idle this share of the step or more is waiting for the host.
IDLE_HOST_BOUND = 0.10
#: This book's choice: compute and memory within this much of each other (both above the line
#: above) count as balanced, as Nsight Compute's own rule words it.
BALANCED = 0.10

STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
#: "Stall" reasons that are not waits: a warp issuing, or eligible and not picked this cycle.
NOT_STALLS = ("selected", "not_selected")


@dataclass(frozen=True)
class Step:
    question: str
    metric: str
    value: str
    verdict: str


def _metric(sections: Mapping[str, Mapping[str, Mapping]], name: str) -> float | None:
    for metrics in sections.values():
        if name in metrics and metrics[name]["value"] is not None:
            return float(metrics[name]["value"])
    return None


def stall_reasons(sections: Mapping[str, Mapping[str, Mapping]]) -> dict[str, float]:
    """Cycles per issued instruction each warp spent stalled, by reason (largest first)."""
    out = {}
    for metrics in sections.values():
        for name, cell in metrics.items():
            if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX) and cell["value"] is not None:
                out[name[len(STALL_PREFIX):-len(STALL_SUFFIX)]] = float(cell["value"])
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


# [profiling:diagnose]
def diagnose(step: Mapping, sections: Mapping[str, Mapping[str, Mapping]] | None = None) -> list[Step]:
    """The checklist for one profiled step (a :class:`~infralens.profiling.trace.StepProfile` as a
    dict) and, optionally, the ncu sections of its top kernel."""
    steps = []
    idle = step["gaps_us"] / step["step_us"]
    host_bound = idle >= IDLE_HOST_BOUND
    steps.append(Step("Is the GPU busy for the whole step?", "idle share of the step (profiler timeline)",
                      f"{idle:.0%}", "no: the GPU waits for the host" if host_bound else "yes"))
    if host_bound and step["launches"]:
        host = step["host_us"] / step["launches"]
        gpu = step["kernel_us"] / step["launches"]
        steps.append(Step("Does the host take longer per kernel than the GPU runs it?",
                          "host time of the step per kernel vs GPU time per kernel",
                          f"{host:.1f} µs vs {gpu:.1f} µs",
                          "yes: host-bound; the timeline tells launch overhead (many short launches: "
                          "fusion, torch.compile, CUDA graphs, a larger batch) from waits inside the step "
                          "(long synchronizing calls, data loading)" if host > gpu
                          else "no: the GPU waits for work issued outside this step's host range "
                               "(another stream or process)"))
        return steps
    if sections is None:
        return steps
    compute = _metric(sections, "Compute (SM) Throughput")
    memory = _metric(sections, "Memory Throughput")
    if compute is None or memory is None:
        raise ValueError("the ncu sections lack the Speed Of Light throughputs")
    dram = _metric(sections, "DRAM Throughput")
    compute, memory = compute / 100, memory / 100
    dram = memory if dram is None else dram / 100
    if max(compute, memory) < SOL_LATENCY_BOUND:
        verdict = "latency-bound: neither unit is busy; read the warp stalls"
    elif min(compute, memory) >= SOL_LATENCY_BOUND and abs(compute - memory) <= BALANCED:
        verdict = ("balanced: compute and memory both near peak"
                   + (" (the memory side on chip, not DRAM)" if dram < SOL_LATENCY_BOUND else ""))
    elif compute > memory:
        verdict = "compute-bound: use the faster units (Tensor Cores, narrower types) or do less work"
    elif dram >= SOL_LATENCY_BOUND:
        verdict = "DRAM-bound: move fewer bytes (fusion, reuse, narrower types) or move them better"
    else:
        verdict = "bound by on-chip memory (L1, shared memory, L2): reuse data in registers, avoid conflicts"
    steps.append(Step("Which unit limits the top kernel?",
                      "Speed Of Light: compute, memory (busiest unit), DRAM throughput",
                      f"{compute:.0%}, {memory:.0%}, {dram:.0%} of peak", verdict))
    stalls = {k: v for k, v in stall_reasons(sections).items() if k not in NOT_STALLS}
    if stalls and max(compute, memory) < SOL_LATENCY_BOUND:  # at a unit's peak, stalls are its cost
        top = next(iter(stalls))
        steps.append(Step("What do its warps wait for?",
                          "top warp-stall reason (cycles per issued instruction)",
                          f"{top}: {stalls[top]:.2f}", _STALL_HINTS.get(top, "see the Warp State section")))
    return steps
# [/profiling:diagnose]


_STALL_HINTS = {
    "long_scoreboard": "global or local memory results (L1TEX): more bytes in flight or fewer accesses",
    "short_scoreboard": "shared memory or special-function results",
    "math_pipe_throttle": "a busy math pipe: the kernel is compute-limited on that pipe",
    "mio_throttle": "the memory-input/output queue (shared memory, special functions) is full",
    "lg_throttle": "the local/global memory queue is full: too many memory instructions",
    "barrier": "__syncthreads(): warps wait for the slowest of their block",
    "wait": "fixed-latency dependencies between instructions",
    "dispatch_stall": "the dispatcher could not issue the instruction",
    "drain": "memory stores draining at the end of the kernel",
    "no_instruction": "instruction cache misses or branch targets",
    "branch_resolving": "branch targets being computed",
    "membar": "memory barriers",
    "sleeping": "warps asleep (nanosleep)",
    "tex_throttle": "the texture unit's queue is full",
    "imc_miss": "constant-cache misses",
}
