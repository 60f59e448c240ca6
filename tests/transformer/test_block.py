"""The Llama-style block: parameters, shapes, FLOPs and incremental decoding."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from infralens.attention.gqa import KVCache
from infralens.memory import count_parameters
from infralens.models import load_config, shipped_config
from infralens.transformer.block import DecoderBlock
from infralens.transformer.flops import forward_flops_per_token
from infralens.transformer.shapes import forward_tensors

TINY = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
        "num_key_value_heads": 2, "num_hidden_layers": 1, "intermediate_size": 176,
        "vocab_size": 100}


@pytest.fixture
def block():
    torch.manual_seed(0)
    return DecoderBlock(load_config(TINY)).double()


def test_parameters_are_what_lab01_counts(block):
    assert sum(p.numel() for p in block.parameters()) == count_parameters(TINY).per_layer


def test_traced_shapes_match_the_table(block):
    B, S = 3, 11
    trace = {}
    block(torch.randn(B, S, 64, dtype=torch.float64), torch.arange(S), trace=trace)
    rows = {r.tensor: r.dims for r in forward_tensors(TINY, B, S)}
    assert trace["x"] == rows["x (residual stream)"] == trace["out"]
    assert trace["q"] == rows["q"] and trace["k"] == trace["v"] == rows["k, v"]
    assert trace["o"] == rows["heads concatenated"] and trace["u"] == rows["gate, up (hidden)"]


def test_flop_counter_agrees_with_the_formula(block):
    B, S = 2, 9
    x = torch.randn(B, S, 64, dtype=torch.float64, requires_grad=True)
    with FlopCounterMode(display=False) as fwd:
        block(x, torch.arange(S))
    per_token = forward_flops_per_token(TINY, S)  # the explicit kernel computes every S x S score
    assert fwd.get_total_flops() == B * S * (per_token.projections + per_token.mlp
                                             + per_token.attention)
    with FlopCounterMode(display=False) as both:
        block(x, torch.arange(S)).sum().backward()
    assert both.get_total_flops() == 3 * fwd.get_total_flops()


def test_decoding_with_a_cache_equals_the_full_forward(block):
    x = torch.randn(2, 10, 64, dtype=torch.float64)
    full = block(x, torch.arange(10))
    cache = KVCache.empty(2, 2, 16, 8, dtype=torch.float64)
    parts = [block(x[:, :4], torch.arange(4), cache)]  # prefill 4 tokens ...
    for t in range(4, 10):  # ... then one token per step
        parts.append(block(x[:, t:t + 1], torch.tensor([t]), cache))
    assert torch.allclose(torch.cat(parts, 1), full, atol=1e-12)


def test_refuses_shapes_it_does_not_build():
    with pytest.raises(ValueError):
        DecoderBlock(load_config(shipped_config("gpt2")))
    with pytest.raises(ValueError):
        DecoderBlock(load_config(shipped_config("qwen2-0.5b")))  # q/k/v biases
