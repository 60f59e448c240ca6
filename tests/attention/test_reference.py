"""Naive attention, the reference every other attention is checked against, against PyTorch's own."""

import math

import pytest
import torch
import torch.nn.functional as F

from infralens.attention.io_model import IOCount
from infralens.attention.reference import naive_attention, softmax_scale

SEQ_LENS = [1, 7, 37, 64, 129]


def qkv(S, d=16, lead=(2, 3), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, S, d, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", SEQ_LENS)
def test_naive_matches_an_independent_formula(S, causal):
    q, k, v = qkv(S)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # PyTorch's math path
    torch.testing.assert_close(naive_attention(q, k, v, causal=causal), want, rtol=0, atol=1e-12)


def test_explicit_scale_matches_sdpa_with_the_same_scale():
    q, k, v = qkv(37, d=8, lead=())
    want = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    torch.testing.assert_close(naive_attention(q, k, v, scale=0.3), want, rtol=0, atol=1e-12)


def test_softmax_scale_is_one_over_sqrt_d_unless_given():
    q = torch.zeros(2, 5, 64)
    assert softmax_scale(q) == 1 / math.sqrt(64)
    assert softmax_scale(q, 0.25) == 0.25


def test_first_query_of_causal_attention_sees_only_the_first_key():
    q, k, v = qkv(9, lead=(1,))
    out = naive_attention(q, k, v, causal=True)
    torch.testing.assert_close(out[:, 0], v[:, 0], rtol=0, atol=1e-15)


def test_io_tally_is_the_three_steps_of_the_algorithm():
    # Step 1 reads Q, K and writes S; step 2 reads S and writes P; step 3 reads P, V and writes O.
    S, d = 11, 4
    q, k, v = qkv(S, d, lead=())
    io = IOCount()
    naive_attention(q, k, v, io=io)
    assert io.reads == 3 * S * d + 2 * S * S
    assert io.writes == S * d + 2 * S * S
