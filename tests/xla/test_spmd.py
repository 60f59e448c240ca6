import jax
import numpy as np
import pytest

from infralens.xla import hlo
from infralens.xla.mlp import init_mlp, mlp
from infralens.xla.spmd import make_mesh, megatron_shard_map, megatron_shardings, place


@pytest.fixture(scope="module")
def setup():
    mesh = make_mesh(2, 4)
    params = init_mlp(jax.random.key(0), 32, 128)
    params["fc"]["b"] = jax.random.normal(jax.random.key(2), (128,))
    params["proj"]["b"] = jax.random.normal(jax.random.key(3), (32,))
    x = jax.random.normal(jax.random.key(1), (16, 32))
    specs, x_spec = megatron_shardings(params)
    return mesh, params, x, place(params, specs, mesh), place(x, x_spec, mesh)


def test_annotated_and_shard_map_layouts_equal_the_single_device_mlp(setup):
    mesh, params, x, ps, xs = setup
    want = np.asarray(mlp(params, x))
    np.testing.assert_allclose(np.asarray(jax.jit(mlp)(ps, xs)), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(megatron_shard_map(mesh, params)(ps, xs)), want,
                               rtol=1e-5, atol=1e-5)


def test_megatron_layout_needs_one_all_reduce_of_the_local_output(setup):
    mesh, params, x, ps, xs = setup
    for fn in (jax.jit(mlp), megatron_shard_map(mesh, params)):
        (ar,) = hlo.collectives(fn.lower(ps, xs).compile().as_text())
        assert ar["op"] == "all-reduce"
        assert ar["bytes"] == (16 // 2) * 32 * 4   # this device's rows of the output, f32
        assert ar["replica_groups"] == "{{0,1,2,3},{4,5,6,7}}"  # the model axis


def test_each_device_holds_a_quarter_of_each_weight(setup):
    _, _, _, ps, _ = setup
    shard_fc = ps["fc"]["w"].addressable_shards[0].data.shape
    shard_proj = ps["proj"]["w"].addressable_shards[0].data.shape
    assert shard_fc == (32, 128 // 4) and shard_proj == (128 // 4, 32)


def test_make_mesh_refuses_empty_axes():
    with pytest.raises(ValueError):
        make_mesh(0, 2)
