"""The Pallas RMSNorm, interpreted on the CPU, against a float64 reference at irregular sizes."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from infralens.kernels.pallas_rmsnorm import rmsnorm, rmsnorm_reference


def _ref64(x, w, eps=1e-6):
    x = np.asarray(x, np.float64)
    return x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps) * np.asarray(w, np.float64)


@pytest.mark.parametrize("rows,d,block_rows", [(24, 40, 8), (7, 33, 7), (6, 129, 3), (1, 5, 1)])
def test_pallas_rmsnorm_matches_float64(rows, d, block_rows):
    x = 3.0 * jax.random.normal(jax.random.key(rows), (rows, d))
    w = jnp.linspace(0.5, 1.5, d)
    got = np.asarray(rmsnorm(x, w, block_rows=block_rows, interpret=True))
    np.testing.assert_allclose(got, _ref64(x, w), rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(np.asarray(rmsnorm_reference(x, w)), _ref64(x, w), rtol=2e-6, atol=2e-6)


def test_bf16_output_is_within_one_bf16_spacing():
    x = jax.random.normal(jax.random.key(0), (16, 64)).astype(jnp.bfloat16)
    w = jnp.ones(64, jnp.bfloat16)
    got = np.asarray(rmsnorm(x, w, block_rows=4, interpret=True).astype(jnp.float32))
    ref = _ref64(x.astype(jnp.float32), w.astype(jnp.float32))
    assert np.all(np.abs(got - ref) <= 2.0**-8 * np.abs(ref) + 1e-6)


@pytest.mark.parametrize("shape_w,block_rows,msg", [((5,), 4, "expected"), ((8,), 3, "divide"),
                                                    ((8,), 0, "divide")])
def test_bad_shapes_are_refused(shape_w, block_rows, msg):
    with pytest.raises(ValueError, match=msg):
        rmsnorm(jnp.ones((8, 8)), jnp.ones(shape_w), block_rows=block_rows, interpret=True)
