"""FlashAttention's forward pass in plain PyTorch (both loop orders) against naive attention in float64."""

import math

import pytest
import torch

from infralens.attention.flash_reference import (
    attention_backward,
    flash_attention_backward,
    flash_attention_forward,
    flash_attention_forward_paper,
)
from infralens.attention.io_model import paper_block_sizes
from infralens.attention.reference import naive_attention

SEQ_LENS = [1, 7, 37, 64, 129]  # odd lengths leave partial blocks


def qkv(S, d=16, lead=(2, 3), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, S, d, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize("blocks", [(16, 16), (16, 8), (8, 16), (32, 5)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", SEQ_LENS)
def test_tiled_forward_equals_naive(S, causal, blocks):
    q, k, v = qkv(S)
    ref = naive_attention(q, k, v, causal=causal)
    out, lse = flash_attention_forward(q, k, v, causal=causal, block_m=blocks[0], block_n=blocks[1])
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)
    assert (out - ref).abs().max() < 1e-12  # float64: agreement to rounding
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(lse, torch.logsumexp(scores, dim=-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", SEQ_LENS)
def test_paper_loop_order_equals_naive(S, causal):
    q, k, v = qkv(S)
    ref = naive_attention(q, k, v, causal=causal)
    out = flash_attention_forward_paper(q, k, v, causal=causal, block_r=8, block_c=16)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-6)


@pytest.mark.parametrize("S, d, blocks", [
    (100, 16, (32, 16)),  # B_c < B_r: rows of a query block precede every key of a key block
    (100, 16, (16, 24)),  # B_c not a multiple of B_r
    (512, 128, paper_block_sizes(227 * 1024, 128)),  # the paper's blocks for an H100: 128 x 227
])
def test_paper_loop_order_causal_with_unaligned_blocks(S, d, blocks):
    q, k, v = qkv(S, d, lead=(1, 2), seed=4)
    ref = naive_attention(q, k, v, causal=True)
    out = flash_attention_forward_paper(q, k, v, causal=True, block_r=blocks[0], block_c=blocks[1])
    assert not out.isnan().any()
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def test_explicit_scale_and_no_batch_dims():
    q, k, v = qkv(37, d=8, lead=())
    ref = naive_attention(q, k, v, scale=0.3)
    out, _ = flash_attention_forward(q, k, v, scale=0.3, block_m=16, block_n=16)
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)


def _autograd(q, k, v, d_out, causal):
    """dQ, dK, dV by PyTorch's autograd through naive attention: the independent reference."""
    q, k, v = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    naive_attention(q, k, v, causal=causal).backward(d_out)
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", [1, 7, 37, 64])
def test_backward_formulas_equal_autograd(S, causal):
    q, k, v = qkv(S)
    d_out = qkv(S, seed=1)[0]
    out, lse = flash_attention_forward(q, k, v, causal=causal, block_m=16, block_n=8)
    ref = _autograd(q, k, v, d_out, causal)
    whole = attention_backward(q, k, v, out, d_out, lse, causal=causal)
    tiled = flash_attention_backward(q, k, v, out, d_out, lse, causal=causal, block_m=16, block_n=8)
    for got in (whole, tiled):
        for g, r in zip(got, ref, strict=True):
            assert (g - r).abs().max() < 1e-12


def test_backward_accepts_a_scale_and_unequal_blocks():
    q, k, v = qkv(45)
    d_out = qkv(45, seed=2)[0]
    out, lse = flash_attention_forward(q, k, v, causal=True, scale=0.3, block_m=8, block_n=16)
    qg, kg, vg = (t.clone().requires_grad_(True) for t in (q, k, v))
    naive_attention(qg, kg, vg, causal=True, scale=0.3).backward(d_out)
    got = flash_attention_backward(q, k, v, out, d_out, lse, causal=True, scale=0.3, block_m=8, block_n=16)
    for g, r in zip(got, (qg.grad, kg.grad, vg.grad), strict=True):
        assert (g - r).abs().max() < 1e-12


def test_dq_depends_on_the_order_of_the_key_blocks_in_float32():
    q, k, v = (t.float() for t in qkv(256, d=32, lead=(1, 2), seed=3))
    d_out = qkv(256, d=32, lead=(1, 2), seed=4)[0].float()
    out, lse = flash_attention_forward(q, k, v, block_m=32, block_n=32)
    first = flash_attention_backward(q, k, v, out, d_out, lse, block_m=32, block_n=32)
    order = list(range(8))[::-1]
    second = flash_attention_backward(q, k, v, out, d_out, lse, block_m=32, block_n=32,
                                      key_block_order=order)
    assert torch.equal(first[1], second[1]) and torch.equal(first[2], second[2])  # dK, dV: one owner
    assert not torch.equal(first[0], second[0])  # dQ: a sum in another order rounds differently
    torch.testing.assert_close(first[0], second[0], rtol=1e-5, atol=1e-6)
