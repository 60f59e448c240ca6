"""The chapter's example functions behave as the page says, checked against NumPy in float64."""

import functools

import jax
import jax.numpy as jnp
import numpy as np

from infralens.xla import examples
from infralens.xla.mlp import init_mlp


def test_impure_bakes_the_global_in_at_trace_time(capsys):
    f = jax.jit(examples.impure)
    first = f(jnp.ones(2))
    assert "tracing" in capsys.readouterr().out
    old, examples.SCALE = examples.SCALE, 10.0
    try:
        again = f(jnp.ones(2))
    finally:
        examples.SCALE = old
    assert capsys.readouterr().out == "" and np.allclose(again, first)  # no retrace, old constant


def test_clip_grad_is_the_identity_forward_and_clips_the_cotangent():
    v = jnp.array([0.5, -2.0, 3.0])
    assert np.allclose(examples.clip_grad(v, 1.0), v)
    grad = jax.grad(lambda u: jnp.sum(jnp.array([5.0, -5.0, 0.5]) * examples.clip_grad(u, 1.0)))(v)
    assert np.allclose(grad, [1.0, -1.0, 0.5])


def test_hessian_vector_product_of_the_loss_matches_the_closed_form():
    v, d = np.arange(1.0, 5.0), np.array([1.0, 0.0, -1.0, 2.0])
    hvp = jax.jvp(jax.grad(examples.sin_square_loss), (jnp.asarray(v, jnp.float32),),
                  (jnp.asarray(d, jnp.float32),))[1]
    diag = -np.sin(v) * v**2 + 4 * v * np.cos(v) + 2 * np.sin(v)  # d2/dv2 of sin(v) v^2, float64
    assert np.allclose(hvp, diag * d, rtol=1e-5)


def test_per_example_norms_match_one_gradient_at_a_time():
    params = init_mlp(jax.random.key(0), 8, 16)
    xs, ys = jax.random.normal(jax.random.key(1), (3, 8)), jax.random.normal(jax.random.key(2), (3, 8))
    norms = examples.per_example_norms(params, xs, ys)
    for i in range(3):
        g = jax.grad(examples.example_loss)(params, xs[i], ys[i])
        assert np.isclose(norms[i], np.sqrt(sum(float(jnp.sum(leaf**2)) for leaf in jax.tree.leaves(g))),
                          rtol=1e-5)


def test_loop_and_scan_agree_and_only_the_loop_grows():
    w = 0.1 * jax.random.normal(jax.random.key(3), (16, 16))
    h = jnp.ones((2, 16))
    h64, w64 = np.ones((2, 16)), np.asarray(w, np.float64)
    for _ in range(5):
        h64 = h64 + np.tanh(h64 @ w64)
    for fn in (examples.residual_loop, examples.residual_scan):
        assert np.allclose(fn(w, h, n=5), h64, atol=1e-5)
    eqns = {n: (len(jax.make_jaxpr(functools.partial(examples.residual_loop, w, n=n))(h).jaxpr.eqns),
                len(jax.make_jaxpr(functools.partial(examples.residual_scan, w, n=n))(h).jaxpr.eqns))
            for n in (2, 8)}
    assert eqns[8][0] > eqns[2][0] and eqns[8][1] == eqns[2][1]
    stack = jax.random.normal(jax.random.key(4), (3, 16, 16)) * 0.1
    assert np.allclose(examples.stacked_loop(stack, h), examples.stacked_scan(stack, h), atol=1e-5)


def test_newton_sqrt_converges_with_a_data_dependent_trip_count():
    for a in (2.0, 1e6):
        root, steps = jax.jit(examples.newton_sqrt)(jnp.float32(a))
        assert np.isclose(float(root), np.sqrt(a), rtol=1e-5) and 0 < int(steps) < 50
    assert int(jax.jit(examples.newton_sqrt)(jnp.float32(1e6))[1]) > int(
        jax.jit(examples.newton_sqrt)(jnp.float32(2.0))[1])
