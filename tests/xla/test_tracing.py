import jax
import jax.numpy as jnp
import numpy as np
import pytest

from infralens.xla.tracing import TraceCounter, compile_costs


def test_a_trace_happens_once_per_abstract_signature_and_static_value():
    counter = TraceCounter(lambda x, n: x * n)
    f = jax.jit(counter, static_argnums=1)
    f(jnp.ones(3), 2)
    f(jnp.ones(3), 2)               # same shape, dtype and static value: cached
    f(jnp.ones(3) * 7, 2)           # different data, same signature: cached
    f(jnp.full(3, 7.0), 2)          # filled from a Python float: weakly typed, a new key
    f(jnp.ones(4), 2)               # new shape: retrace
    f(jnp.ones(3), 3)               # new static value: retrace
    f(jnp.ones(3, jnp.int32), 2)    # new dtype: retrace
    f(np.ones(3), 2)                # float64 NumPy input becomes float32 without x64: cached
    assert counter.traces == ["f32[3], 2", "f32[3] weak, 2", "f32[4], 2", "f32[3], 3", "i32[3], 2"]


def test_compile_costs_returns_positive_stage_times_and_a_cached_call():
    costs = compile_costs(lambda x: jnp.sin(x) @ x.T, jnp.ones((32, 32)), calls=3)
    assert set(costs) == {"trace_s", "lower_s", "compile_s", "cached_call_s"}
    assert all(v > 0 for v in costs.values())


def test_compile_costs_refuses_zero_calls():
    with pytest.raises(ValueError):
        compile_costs(jnp.sin, jnp.ones(3), calls=0)


def test_compile_costs_traces_afresh_after_an_earlier_trace():
    counter = TraceCounter(lambda x: jnp.sin(x) * 2)
    jax.make_jaxpr(counter)(jnp.ones(4))  # an earlier trace of the same function and signature
    compile_costs(counter, jnp.ones(4), calls=1)
    assert len(counter.traces) == 2  # compile_costs paid for its own trace
