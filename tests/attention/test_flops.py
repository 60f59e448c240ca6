"""The one attention FLOP count against multiply-adds counted by brute force and by PyTorch."""

import itertools

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from infralens.attention.flops import attention_flops


def brute_force_flops(batch, n_heads, seq_q, seq_k, head_dim, causal):
    """2 FLOP per multiply-add, counted one by one: a visible (query, key) pair costs head_dim
    multiply-adds for its score q . k and head_dim more for its share of p v."""
    offset = seq_k - seq_q  # queries are the last seq_q positions (bottom-right, as decoding)
    macs = 0
    for _b, _h, i, j in itertools.product(range(batch), range(n_heads), range(seq_q), range(seq_k)):
        if not causal or j <= i + offset:
            macs += head_dim + head_dim
    return 2 * macs


@pytest.mark.parametrize("batch, heads, s_q, s_k, d", [(1, 1, 1, 1, 1), (2, 3, 5, 5, 4),
                                                       (1, 2, 1, 9, 8), (3, 1, 4, 7, 2)])
def test_non_causal_is_every_pair(batch, heads, s_q, s_k, d):
    assert attention_flops(batch, heads, s_q, s_k, d) == brute_force_flops(batch, heads, s_q, s_k, d, False)


@pytest.mark.parametrize("S", [1, 2, 5, 16, 33])
def test_causal_is_half_of_full_not_the_visible_pairs(S):
    # The convention counts S^2 / 2 pairs; S (S + 1) / 2 are visible: a factor 1 + 1/S apart.
    batch, heads, d = 2, 3, 4
    exact = brute_force_flops(batch, heads, S, S, d, True)
    half = attention_flops(batch, heads, S, S, d, causal=True)
    assert exact == 4 * batch * heads * d * S * (S + 1) // 2
    assert half == 2 * batch * heads * d * S * S == attention_flops(batch, heads, S, S, d) // 2
    assert exact * S == half * (S + 1)


def test_matches_torch_flop_counter_on_the_two_matmuls():
    b, a, s_q, s_k, d = 2, 3, 7, 11, 8
    q, k, v = torch.randn(b, a, s_q, d), torch.randn(b, a, s_k, d), torch.randn(b, a, s_k, d)
    with FlopCounterMode(display=False) as counter:
        torch.softmax(q @ k.transpose(-2, -1), dim=-1) @ v
    assert counter.get_total_flops() == attention_flops(b, a, s_q, s_k, d)


def test_sdpa_flops():
    # (moved from the transformer FLOP tests: sdpa_flops became attention_flops)
    assert attention_flops(2, 4, 8, 8, 16, causal=False) == 4 * 2 * 4 * 8 * 8 * 16
    assert attention_flops(2, 4, 8, 8, 16, causal=True) == 2 * 2 * 4 * 8 * 8 * 16
    assert attention_flops(1, 4, 1, 100, 16, causal=False) == 4 * 4 * 100 * 16
    with pytest.raises(ValueError):
        attention_flops(1, 1, 1, 8, 4, causal=True)


def test_flops_convention():
    # (the FlashAttention paper's convention: 4 S^2 d per head, half of it when causal)
    assert attention_flops(1, 1, 1024, 1024, 128) == 4 * 1024**2 * 128
    assert attention_flops(1, 3, 1024, 1024, 128, causal=True) == 3 * 2 * 1024**2 * 128


def test_returns_an_exact_integer():
    assert isinstance(attention_flops(1, 1, 3, 3, 3, causal=True), int)
    assert isinstance(attention_flops(2, 2, 3, 3, 3), int)
