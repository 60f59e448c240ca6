"""FlashAttention's forward pass in plain PyTorch (both loop orders) against naive attention in float64."""

import math

import pytest
import torch

from infralens.attention.flash_reference import flash_attention_forward, flash_attention_forward_paper
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
