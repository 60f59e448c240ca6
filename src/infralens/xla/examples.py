"""Small functions that show what JAX's transformations do to the functions you write.

Each one exists to be traced, differentiated, batched or compiled on a page: a function with a
side effect and a hidden input, a custom backward rule, a loss for one example, a loop written in
Python and the same loop as ``lax.scan``, a data-dependent ``while_loop``, and the per-example
gradient norm. None of them is a model; they are the shapes of code whose behaviour under
``jit``, ``grad`` and ``vmap`` a JAX user has to predict.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from infralens.xla.mlp import mlp

__all__ = [
    "SCALE", "clip_grad", "example_loss", "impure", "newton_sqrt", "per_example_norms",
    "residual_loop", "residual_scan", "sin_square_loss", "stacked_loop", "stacked_scan",
]

# [xla:impure]
SCALE = 2.0  # a global the function reads: a hidden input


def impure(v):
    print("  tracing: v is", v)  # a side effect: runs only while JAX traces
    return v * SCALE  # read once, at trace time, and baked into the program as a constant
# [/xla:impure]


def sin_square_loss(v):
    """``sum(sin(v) * v**2)``: a scalar function with a dense Hessian, for Hessian-vector products."""
    return jnp.sum(jnp.sin(v) * v**2)


# [xla:clip-grad]
@jax.custom_vjp
def clip_grad(v, bound):
    return v  # forward: the identity


def _clip_fwd(v, bound):
    return v, bound  # residuals saved for the backward pass


def _clip_bwd(bound, cotangent):
    return jnp.clip(cotangent, -bound, bound), None  # one cotangent per input; none for the bound


clip_grad.defvjp(_clip_fwd, _clip_bwd)
# [/xla:clip-grad]


# [xla:example-loss]
def example_loss(params, xi, yi):
    """Mean squared error of the MLP on one example (``xi`` and ``yi`` of shape ``(d_model,)``)."""
    return jnp.mean((mlp(params, xi) - yi) ** 2)


def per_example_norms(params, xs, ys):
    """The gradient norm of every example of a batch: ``vmap`` of ``grad``, then one norm each."""
    grads = jax.vmap(jax.grad(example_loss), in_axes=(None, 0, 0))(params, xs, ys)
    return jnp.sqrt(sum(jnp.sum(leaf.reshape(leaf.shape[0], -1) ** 2, axis=1)
                        for leaf in jax.tree.leaves(grads)))
# [/xla:example-loss]


# [xla:loops]
def residual_loop(w, h, n: int):
    """``n`` residual steps ``h <- h + tanh(h @ w)``, written as a Python loop."""
    for _ in range(n):  # Python runs this while tracing: n copies of the body in the program
        h = h + jnp.tanh(h @ w)
    return h


def residual_scan(w, h, n: int):
    """The same ``n`` steps as ``lax.scan``: the body is traced once and the loop stays a loop."""
    def body(carry, _):
        return carry + jnp.tanh(carry @ w), None
    return jax.lax.scan(body, h, None, length=n)[0]


def stacked_loop(weights, h):
    """One residual step per layer, ``weights`` stacked on a leading layer axis: a Python loop."""
    for i in range(weights.shape[0]):
        h = h + jnp.tanh(h @ weights[i])
    return h


def stacked_scan(weights, h):
    """The same layers as ``lax.scan`` over the leading axis of ``weights``."""
    def body(carry, w):
        return carry + jnp.tanh(carry @ w), None
    return jax.lax.scan(body, h, weights)[0]
# [/xla:loops]


# [xla:newton]
def newton_sqrt(a, rtol: float = 1e-6, max_steps: int = 50):
    """sqrt(a) by Newton's method until |x^2 - a| <= rtol * a: a trip count that depends on data."""
    def cond(state):
        guess, steps = state
        return (jnp.abs(guess * guess - a) > rtol * a) & (steps < max_steps)

    def body(state):
        guess, steps = state
        return 0.5 * (guess + a / guess), steps + 1

    return jax.lax.while_loop(cond, body, (a, 0))
# [/xla:newton]
