"""The Megatron layout of the MLP on a device mesh, two ways.

Megatron-LM splits the first weight of an MLP by columns and the second by rows, so each device
computes its slice of the hidden activation with no communication and one all-reduce sums the
partial outputs. In JAX that layout is either *annotated* (:func:`megatron_shardings`: XLA's
partitioner propagates the shardings and inserts the all-reduce) or *written per device*
(:func:`megatron_shard_map`: ``shard_map`` with an explicit ``psum``).
"""

from __future__ import annotations

__all__ = ["MESH_AXES", "make_mesh", "megatron_shard_map", "megatron_shardings", "place"]

#: The mesh axes used here: data parallel over rows of x, model (tensor) parallel over d_ff.
MESH_AXES = ("data", "model")


def make_mesh(data: int, model: int, devices=None):
    """A ``data x model`` mesh whose axes XLA's partitioner may propagate over (``Auto``)."""
    import jax
    from jax.sharding import AxisType

    if data < 1 or model < 1:
        raise ValueError(f"mesh sizes must be positive, not {data} x {model}")
    return jax.make_mesh((data, model), MESH_AXES, axis_types=(AxisType.Auto, AxisType.Auto),
                         devices=devices)


# [xla:megatron-specs]
def megatron_shardings(params: dict) -> tuple[dict, object]:
    """PartitionSpecs for (params, x): w_fc by columns, w_proj by rows, x by rows over data."""
    from jax.sharding import PartitionSpec as P

    specs = {"fc": {"w": P(None, "model")}, "proj": {"w": P("model", None)}}
    if "b" in params["fc"]:
        specs["fc"]["b"] = P("model")      # the hidden bias is split like w_fc's columns
        specs["proj"]["b"] = P(None)       # the output bias is added once, after the sum
    return specs, P("data", None)
# [/xla:megatron-specs]


def place(tree, specs, mesh):
    """``jax.device_put`` every leaf of ``tree`` with the matching PartitionSpec on ``mesh``."""
    import jax
    from jax.sharding import NamedSharding

    return jax.tree.map(lambda a, s: jax.device_put(a, NamedSharding(mesh, s)), tree, specs)


# [xla:megatron-shard-map]
def megatron_shard_map(mesh, params: dict):
    """The same MLP written for one device: local matmuls, then an explicit psum over 'model'."""
    import jax

    param_specs, x_spec = megatron_shardings(params)

    def local(p, x):  # shapes here are per device: w_fc is (d, d_ff / model)
        h = x @ p["fc"]["w"]
        if "b" in p["fc"]:
            h = h + p["fc"]["b"]
        partial = jax.nn.gelu(h, approximate=True) @ p["proj"]["w"]
        y = jax.lax.psum(partial, "model")  # the one collective of the layer
        if "b" in p["proj"]:
            y = y + p["proj"]["b"]
        return y

    return jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(param_specs, x_spec),
                                 out_specs=x_spec))
# [/xla:megatron-shard-map]
