"""The book's one timing harness. Every GPU timing on every page goes through :func:`bench`.

The policy, stated once:

* CUDA: ``triton.testing.do_bench``. CUDA events bracket each call; before each call the L2
  cache is flushed (do_bench zeroes a buffer larger than any L2), so every call reads its
  operands from HBM; warm-up calls run first. Zeroing leaves the L2 full of dirty lines, which the
  timed call writes back to HBM as it evicts them; ``flush="read"`` flushes by reading the buffer
  instead (a sum over it), which leaves clean lines, for a comparison in which that write-back
  would favour one side.
* The first call runs outside the clock (module load, lazy initialization, autotuning), and a
  slow function gets enough time for at least ``min_reps`` timed calls.
* The result is the median of the timed calls, with the 20th and 80th percentiles as spread.
* CPU (for the tests, which cannot time a GPU): the wall clock of repeated calls, same median.
* :func:`bench_graph`: ``fn`` captured once into a CUDA graph and the graph's replays timed as
  above, for work whose host side (Python, autograd) takes longer than its kernels: a replay
  launches every kernel of ``fn`` with no host work between them, which is what the GPU sees
  when the host runs ahead of it, as in a training loop.
* ``device="host"``: the same wall clock, for a function that waits for its own GPU work.
  :func:`bench_host` builds one: ``per_sample`` launches back to back, then one wait
  (``jax.block_until_ready``, ``torch.cuda.synchronize``), divided by ``per_sample``, so the
  host's launch and wait latency overlaps the GPU's work instead of adding to it. JAX launches on
  its own CUDA stream, which events recorded on PyTorch's stream do not bracket; the L2 is not
  flushed between launches.

Callers that take a timer as an argument (sweeps the tests run with a fake clock) get one from
:func:`cuda_timer`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

__all__ = ["Timer", "bench", "bench_graph", "bench_host", "bench_ms", "cuda_timer", "median"]

#: A function that times a no-argument callable and returns milliseconds.
Timer = Callable[[Callable[[], object]], float]


def median(times: list[float]) -> float:
    return float(statistics.median(times))


def _quantile(times: list[float], q: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cuda_times(fn: Callable[[], object], min_reps: int, rep_ms: float, warmup_ms: float) -> list[float]:
    import torch
    from triton.testing import do_bench

    fn()  # first call outside the clock
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    once = start.elapsed_time(end)
    return list(do_bench(fn, warmup=max(warmup_ms, 2 * once), rep=max(rep_ms, min_reps * once),
                         return_mode="all"))


#: Bytes read to empty the L2 before each call with ``flush="read"``: do_bench's buffer size.
READ_FLUSH_BYTES = 256 * 2**20


def _cuda_times_read_flush(fn: Callable[[], object], min_reps: int, rep_ms: float,
                           warmup_ms: float) -> list[float]:
    """do_bench's loop with the L2 emptied by a sum over a buffer larger than it (clean lines)."""
    import torch

    buf = torch.ones(READ_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    fn()  # first call outside the clock
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        buf.sum()
        fn()
    end.record()
    end.synchronize()
    once = start.elapsed_time(end) / 5               # one flush and one call, as do_bench estimates
    for _ in range(max(1, int(max(warmup_ms, 2 * once) / once))):
        fn()
    n = max(min_reps, int(max(rep_ms, min_reps * once) / once))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for i in range(n):
        buf.sum()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]


def _cpu_times(fn: Callable[[], object], min_reps: int, rep_ms: float) -> list[float]:
    fn()  # first call outside the clock
    times: list[float] = []
    deadline = time.perf_counter() + rep_ms / 1e3
    while len(times) < min_reps or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def bench(fn: Callable[[], object], *, device: str = "cuda", min_reps: int = 10,
          rep_ms: float = 100.0, warmup_ms: float = 25.0, flush: str = "zero") -> dict:
    """Time ``fn`` by the policy above: ``{"ms", "ms_q20", "ms_q80", "reps"}`` (milliseconds).
    ``flush`` (CUDA only): how the L2 is emptied before each call, ``"zero"`` or ``"read"``."""
    if min_reps < 1 or rep_ms <= 0 or warmup_ms < 0:
        raise ValueError("min_reps must be >= 1, rep_ms > 0 and warmup_ms >= 0")
    if flush not in ("zero", "read"):
        raise ValueError(f"flush must be 'zero' or 'read', got {flush!r}")
    if str(device).startswith("cuda") and flush == "read":
        times = _cuda_times_read_flush(fn, min_reps, rep_ms, warmup_ms)
    elif str(device).startswith("cuda"):  # "host" and "cpu": the wall clock below
        times = _cuda_times(fn, min_reps, rep_ms, warmup_ms)
    else:
        times = _cpu_times(fn, min_reps, rep_ms)
    return {"ms": median(times), "ms_q20": _quantile(times, 0.2), "ms_q80": _quantile(times, 0.8),
            "reps": len(times)}


def bench_graph(fn: Callable[[], object], *, warmup_calls: int = 3, **kwargs) -> dict:
    """:func:`bench` of the replay of a CUDA graph that captured one call of ``fn`` (after
    ``warmup_calls`` calls on a side stream, as graph capture requires)."""
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: a CUDA graph needs a GPU")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup_calls):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return bench(graph.replay, **kwargs)


def bench_host(launch: Callable[[], object], wait: Callable[[object], object], *,
               per_sample: int = 10, **kwargs) -> dict:
    """Time ``launch`` on the host clock, ``per_sample`` launches and one ``wait(last result)``
    per sample; the times returned are per launch (``{"ms", "ms_q20", "ms_q80", "reps",
    "per_sample"}``)."""
    if per_sample < 1:
        raise ValueError("per_sample must be >= 1")

    def sample() -> None:
        out = None
        for _ in range(per_sample):
            out = launch()
        wait(out)

    timed = bench(sample, device="host", **kwargs)
    return {**{k: v / per_sample for k, v in timed.items() if k.startswith("ms")},
            "reps": timed["reps"], "per_sample": per_sample}


def bench_ms(fn: Callable[[], object], **kwargs) -> float:
    """The median milliseconds of :func:`bench`."""
    return bench(fn, **kwargs)["ms"]


def cuda_timer(warmup_ms: float = 25.0, rep_ms: float = 100.0) -> Timer:
    """A :data:`Timer` that runs :func:`bench_ms` on the current CUDA device."""
    return lambda fn: bench_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
