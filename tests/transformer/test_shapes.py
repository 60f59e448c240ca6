"""Attention layouts and the forward-pass tensor table."""

from infralens.models import load_config, shipped_config
from infralens.transformer.shapes import attention_layout, forward_tensors


def test_layouts_of_shipped_models():
    assert attention_layout(shipped_config("gpt2")).kind == "MHA"
    l70 = attention_layout(shipped_config("llama-3-70b"))
    assert (l70.kind, l70.group_size) == ("GQA", 8)
    cfg = dict(shipped_config("llama-3-8b"), num_key_value_heads=1)
    assert attention_layout(cfg).kind == "MQA"


def test_forward_table():
    shape = load_config(shipped_config("llama-3-70b"))
    rows = forward_tensors(shape, 2, 8192)
    by_name = {r.tensor: r for r in rows}
    assert by_name["q"].dims == (2, 64, 8192, 128)
    assert by_name["k, v"].dims == (2, 8, 8192, 128)
    assert by_name["scores q k^T"].elements == 2 * 64 * 8192 * 8192
    assert by_name["logits"].dims == (2, 8192, shape.vocab_size)
    assert all(len(r.symbols) == len(r.dims) for r in rows)
