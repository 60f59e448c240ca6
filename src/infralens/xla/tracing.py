"""What ``jax.jit`` costs before the first result, and when it pays again.

``jax.jit(f)(x)`` traces ``f`` with abstract values (shape and dtype, not data) into a jaxpr,
lowers the jaxpr to StableHLO, compiles that with XLA, and caches the executable under a key made
of the function, the abstract signature of the arguments (shape, dtype, weak type, sharding) and
the values of static arguments. A call whose key is new traces and compiles again: a retrace.
:func:`compile_costs` times each stage with JAX's ahead-of-time API; :class:`TraceCounter` counts
traces through the one thing a traced function does only while tracing, its Python side effects.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["TraceCounter", "compile_costs", "first_call_seconds"]


class TraceCounter:
    """Wrap ``fn`` so that every trace of it is counted (and its abstract arguments remembered).

    Python code inside a jitted function runs while JAX traces it, not when the compiled
    executable runs, so a counter in the body counts traces, which is to say cache misses.
    """

    def __init__(self, fn: Callable) -> None:
        self.fn = fn
        self.traces: list[str] = []

    def __call__(self, *args, **kwargs):
        self.traces.append(", ".join(_describe(a) for a in (*args, *kwargs.values())))
        return self.fn(*args, **kwargs)


def _describe(value) -> str:
    aval = getattr(value, "aval", None)
    if aval is not None:  # weak types (from Python scalars) are part of the cache key too
        return aval.str_short(short_dtypes=True) + (" weak" if aval.weak_type else "")
    return repr(value)


def compile_costs(fn: Callable, *args, calls: int = 20, **kwargs) -> dict[str, float]:
    """Seconds spent tracing, lowering and compiling ``jax.jit(fn)(*args)``, then per cached call.

    ``"cached_call_s"`` is the median of ``calls`` calls that hit the cache (each waits for its
    result), so the three stages can be read against what one call costs once compiled. ``fn`` is
    wrapped in a new function first, so earlier traces of ``fn`` (by ``make_jaxpr`` or another
    ``jit``) are not reused and every stage is paid in full.
    """
    import statistics

    import jax

    if calls < 1:
        raise ValueError("calls must be at least 1")
    def fresh(*a, **k):  # a new function object: JAX's trace and compile caches are keyed on the
        return fn(*a, **k)  # function, so jitting `fn` itself could hit a trace made earlier

    jitted = jax.jit(fresh)
    t0 = time.perf_counter()
    traced = jitted.trace(*args, **kwargs)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    jax.block_until_ready(compiled(*args, **kwargs))
    runs = []
    for _ in range(calls):
        s = time.perf_counter()
        jax.block_until_ready(compiled(*args, **kwargs))
        runs.append(time.perf_counter() - s)
    return {"trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2,
            "cached_call_s": statistics.median(runs)}


def first_call_seconds(costs: dict[str, float]) -> float:
    """What the first call with a new signature pays before running: trace + lower + compile."""
    return costs["trace_s"] + costs["lower_s"] + costs["compile_s"]
