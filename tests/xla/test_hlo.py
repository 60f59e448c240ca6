"""The HLO reader against hand-written HLO text and against what XLA prints for known programs."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from infralens.xla import hlo
from infralens.xla.spmd import make_mesh, place

TEXT = """HloModule jit_f, entry_computation_layout={(f32[8,16]{1,0})->(f32[8]{0}, bf16[2,3]{1,0})}

%add.clone (x: f32[], y: f32[]) -> f32[] {
  %x = f32[] parameter(0)
  %y = f32[] parameter(1)
  ROOT %add = f32[] add(f32[] %x, f32[] %y)
}

%fused_computation (param_0: f32[8,16]) -> f32[8,16] {
  %param_0 = f32[8,16]{1,0} parameter(0)
  %constant = f32[] constant(2)
  %broadcast = f32[8,16]{1,0} broadcast(f32[] %constant), dimensions={}
  ROOT %multiply = f32[8,16]{1,0} multiply(f32[8,16]{1,0} %param_0, f32[8,16]{1,0} %broadcast)
}

ENTRY %main.5 (p: f32[8,16]) -> (f32[8], bf16[2,3]) {
  %p = f32[8,16]{1,0} parameter(0)
  %fusion = f32[8,16]{1,0} fusion(f32[8,16]{1,0} %p), kind=kLoop, calls=%fused_computation
  %all-reduce = f32[8,16]{1,0} all-reduce(f32[8,16]{1,0} %fusion), channel_id=1, \
replica_groups={{0,1},{2,3}}, to_apply=%add.clone
  %reduce = f32[8]{0} reduce(%all-reduce, %c), dimensions={1}, to_apply=%add.clone
  %cc = (bf16[2,3]{1,0}, u32[]) custom-call(%p), custom_call_target="foo"
  %gte = bf16[2,3]{1,0} get-tuple-element(%cc), index=0
  ROOT %tuple = (f32[8]{0}, bf16[2,3]{1,0}) tuple(%reduce, %gte)
}
"""


def test_parse_reads_computations_entry_and_opcodes():
    module = hlo.parse(TEXT)
    assert module.entry == "main.5"
    assert list(module.computations) == ["add.clone", "fused_computation", "main.5"]
    assert module.opcodes() == {"parameter": 1, "fusion": 1, "all-reduce": 1, "reduce": 1,
                                "custom-call": 1, "get-tuple-element": 1, "tuple": 1}
    cc = next(i for i in module.instructions() if i.opcode == "custom-call")
    assert cc.shape == "(bf16[2,3]{1,0}, u32[])"
    assert cc.attribute("custom_call_target") == '"foo"'
    assert module.instructions()[-1].root


def test_collectives_and_their_bytes():
    (ar,) = hlo.collectives(TEXT)
    assert ar["op"] == "all-reduce" and ar["bytes"] == 8 * 16 * 4
    assert ar["replica_groups"] == "{{0,1},{2,3}}"


def test_fusions_list_the_ops_inside_without_parameters_and_constants():
    (fusion,) = hlo.fusions(TEXT)
    assert fusion["kind"] == "kLoop"
    assert fusion["ops"] == {"broadcast": 1, "multiply": 1}


@pytest.mark.parametrize("shape,expected", [
    ("f32[8,16]{1,0}", 512), ("bf16[2,3]{1,0}", 12), ("f32[]", 4), ("(f32[8]{0}, s8[3])", 35),
])
def test_array_bytes(shape, expected):
    assert hlo.array_bytes(shape) == expected


def test_array_bytes_refuses_unknown_types():
    with pytest.raises(ValueError, match="unknown HLO element type"):
        hlo.array_bytes("q7[3]")


def test_parse_refuses_text_without_an_entry():
    with pytest.raises(ValueError, match="no ENTRY"):
        hlo.parse("HloModule empty\n")


def _gelu_sum(x, w):
    return jax.nn.gelu(x @ w).sum()


def test_stages_of_a_real_function_agree_with_each_other():
    x, w = jnp.ones((8, 16)), jnp.ones((16, 32))
    st = hlo.stages(_gelu_sum, x, w)
    prims = hlo.jaxpr_primitives(st["jaxpr"])
    assert prims["dot_general"] == 1 and prims["tanh"] == 1 and prims["reduce_sum"] == 1
    ops = hlo.stablehlo_ops(st["stablehlo"])
    assert ops["stablehlo.dot_general"] == 1 and ops["stablehlo.tanh"] == 1
    assert hlo.parse(st["hlo"]).opcodes()["dot"] == 1
    # the optimized module still computes the same thing
    assert np.isclose(float(st["compiled"](x, w)), float(_gelu_sum(x, w)))


def test_a_row_sharded_sum_compiles_to_one_all_reduce_over_all_devices():
    mesh = make_mesh(8, 1)
    from jax.sharding import PartitionSpec as P
    x = place(jnp.arange(64.0).reshape(16, 4), P("data", None), mesh)
    text = jax.jit(lambda a: a.sum()).lower(x).compile().as_text()
    (ar,) = hlo.collectives(text)
    assert ar["op"] == "all-reduce" and ar["bytes"] == 4
    groups = ar["replica_groups"]  # listed, or in the mesh notation of newer XLA
    assert groups == "{{0,1,2,3,4,5,6,7}}" or groups.endswith("{'axis_0'}"), groups
