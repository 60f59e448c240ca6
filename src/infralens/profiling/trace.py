"""A training step under ``torch.profiler``, and the three readings that answer "why is it slow".

* **Top operators** by self time: where the time goes, operator by operator.
* **Gaps**: on the GPU, the time no kernel runs between the step's first kernel and its last; on
  the CPU, the time of the step spent outside any operator (Python, the optimizer loop, the
  profiler's own bookkeeping). Large GPU gaps mean the device waits for the host.
* **Launch overhead**: the CPU time spent in ``cudaLaunchKernel`` against the GPU time of the
  kernels it launched. When kernels are shorter than their launches, the step is launch-bound.

:func:`profile_step` runs the book's GPT for a few steps and profiles the last one;
:func:`read_profile` reduces the profiler's events to those readings (plain numbers, JSON-able).
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch.profiler import ProfilerActivity, profile

from infralens.models.gpt import GPT, GPTConfig

__all__ = ["StepProfile", "cuda_kernels", "idle_gaps", "profile_step", "quiet_profiler", "read_profile",
           "time_step"]


@dataclass(frozen=True)
class StepProfile:
    device: str
    step_us: float  # CPU: the "step" range; GPU: from the step's first kernel to its last
    host_us: float  # the "step" range on the CPU: the host's time to issue the step
    top: list[dict]  # operators (CPU) or kernels (GPU) by self time
    busy_us: float  # union of the operator (CPU) or kernel (GPU) intervals inside the step
    gaps_us: float  # step_us - busy_us
    launches: int  # cudaLaunchKernel (and cuLaunchKernel) calls; 0 on the CPU
    launch_cpu_us: float  # CPU time in those calls
    kernel_us: float  # GPU time of all kernels

    def as_dict(self) -> dict:
        return dict(self.__dict__)


# [profiling:idle-gaps]
def idle_gaps(intervals: list[tuple[float, float]], start: float, end: float) -> tuple[float, float]:
    """(busy, idle) microseconds of ``[start, end]`` given possibly overlapping busy intervals."""
    busy, cursor = 0.0, start
    for a, b in sorted((max(a, start), min(b, end)) for a, b in intervals if b > start and a < end):
        if b <= cursor:
            continue
        busy += b - max(a, cursor)
        cursor = b
    return busy, (end - start) - busy
# [/profiling:idle-gaps]


def read_profile(prof, device: str, n_top: int = 10) -> StepProfile:
    """The readings of one profiled step (the range named ``"step"``)."""
    events = list(prof.events())
    step = next(e for e in events if e.name == "step" and e.device_type == torch.autograd.DeviceType.CPU)
    t0, t1 = step.time_range.start, step.time_range.end
    if device == "cuda":
        # every kernel of the profile (it holds this step and a synchronize); not the annotations
        # record_function mirrors onto the GPU timeline
        kernels = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA
                   and not e.is_user_annotation]
        intervals = [(e.time_range.start, e.time_range.end) for e in kernels]
        by_name: dict[str, list[float]] = defaultdict(list)
        for e in kernels:
            by_name[e.name].append(e.time_range.elapsed_us())
        launches = [e for e in events if e.name in ("cudaLaunchKernel", "cudaLaunchKernelExC",
                                                     "cuLaunchKernel", "cuLaunchKernelEx")]
        # the GPU's window: from its first kernel to its last (kernels run after their launches)
        t0, t1 = min(a for a, _ in intervals), max(b for _, b in intervals)
    else:
        inside = [e for e in events if e.time_range.start >= t0 and e.time_range.end <= t1]
        ops = [e for e in inside if e.name != "step" and e.device_type == torch.autograd.DeviceType.CPU]
        intervals = [(e.time_range.start, e.time_range.end) for e in ops]  # nested ones merge
        by_name = defaultdict(list)
        for e in ops:
            by_name[e.name].append(e.self_cpu_time_total)
        launches, kernels = [], []
    busy, idle = idle_gaps(intervals, t0, t1)
    top = sorted(({"name": k, "count": len(v), "self_us": sum(v)} for k, v in by_name.items()),
                 key=lambda r: -r["self_us"])[:n_top]
    return StepProfile(device=device, step_us=t1 - t0, host_us=step.time_range.elapsed_us(), top=top,
                       busy_us=busy, gaps_us=idle,
                       launches=len(launches),
                       launch_cpu_us=sum(e.time_range.elapsed_us() for e in launches),
                       kernel_us=sum(e.time_range.elapsed_us() for e in kernels))


def time_step(cfg: GPTConfig, batch: int, seq: int, device: str = "cuda", steps: int = 10,
              amp: bool = True) -> float:
    """Median seconds of an unprofiled training step (after two warm-up steps), each step timed
    between two synchronizations: the reference that tells how much the profiler itself slowed
    the host. Run it before profiling in the same process (the profiler's setup can leave costs
    behind)."""
    import statistics
    import time

    run = _trainer(cfg, batch, seq, device, amp)
    for _ in range(2):
        run()
    times = []
    for _ in range(steps):
        _sync(device)
        start = time.perf_counter()
        run()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def _trainer(cfg: GPTConfig, batch: int, seq: int, device: str, amp: bool):
    torch.manual_seed(0)
    dev = torch.device(device)
    model = GPT(cfg).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev)
    y = torch.randint(0, cfg.vocab_size, (batch, seq), device=dev)

    def step() -> None:
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = model(x, y)[1]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step


@contextlib.contextmanager
def quiet_profiler() -> Iterator[None]:
    """Silence the profiler backend's own log lines (Kineto writes ``profiler_start`` and
    ``profiler_stop`` straight to file descriptor 2) and its Python warnings while it runs."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def profile_step(cfg: GPTConfig, batch: int, seq: int, device: str = "cpu", warmup: int = 2,
                 amp: bool = False, n_top: int = 10) -> StepProfile:
    """Train ``warmup`` steps, then profile one step of the GPT ``cfg`` on ``batch`` x ``seq``."""
    dev = torch.device(device)
    step = _trainer(cfg, batch, seq, device, amp)
    for _ in range(warmup):
        step()
    _sync(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
    with quiet_profiler(), profile(activities=activities) as prof:
        with torch.profiler.record_function("step"):
            step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
    return read_profile(prof, dev.type, n_top)


def cuda_kernels(fn, *args) -> list[str]:
    """The names of the CUDA kernels one call of ``fn(*args)`` launches, in launch order.

    ``fn`` runs once before the profiled call, so lazy initialization and autotuning stay out.
    """
    fn(*args)
    torch.cuda.synchronize()
    with quiet_profiler(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn(*args)
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return [e.name for e in sorted(kernels, key=lambda e: e.time_range.start)]
