"""Grouped-query attention, the KV cache and the score statistics."""

import math

import pytest
import torch
import torch.nn.functional as F

from infralens.attention.gqa import (
    KVCache,
    cascade_attention,
    grouped_query_attention,
    partial_attention,
    ring_attention,
    score_statistics,
)
from infralens.attention.masks import causal_mask
from tests.tensors import seeded_randn

rand = seeded_randn(3)


@pytest.mark.parametrize("a, a_kv", [(8, 8), (8, 2), (8, 1), (6, 3)])
@pytest.mark.parametrize("causal", [False, True])
def test_gqa_matches_sdpa_and_repeated_heads(a, a_kv, causal):
    q, k, v = rand(2, a, 7, 16), rand(2, a_kv, 7, 16), rand(2, a_kv, 7, 16)
    ours = grouped_query_attention(q, k, v, causal=causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert torch.allclose(ours, ref, atol=1e-12)
    g = a // a_kv
    mha = grouped_query_attention(q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), causal)
    assert torch.allclose(ours, mha, atol=1e-12)


def test_fewer_queries_than_keys_is_bottom_right():
    q, k, v = rand(1, 4, 3, 8), rand(1, 2, 10, 8), rand(1, 2, 10, 8)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(3, 10), enable_gqa=True)
    assert torch.allclose(grouped_query_attention(q, k, v), ref, atol=1e-12)


def test_bad_grouping():
    with pytest.raises(ValueError):
        grouped_query_attention(rand(1, 6, 2, 4), rand(1, 4, 2, 4), rand(1, 4, 2, 4))


def test_kv_cache_fills_left_to_right_and_refuses_overflow():
    cache = KVCache.empty(2, 1, 5, 4, dtype=torch.float64)
    k1, v1 = rand(2, 1, 3, 4), rand(2, 1, 3, 4)
    k, v = cache.append(k1, v1)
    assert cache.length == 3 and torch.equal(k, k1) and torch.equal(v, v1)
    k, _ = cache.append(rand(2, 1, 2, 4), rand(2, 1, 2, 4))
    assert k.shape == (2, 1, 5, 4)
    with pytest.raises(ValueError):
        cache.append(rand(2, 1, 1, 4), rand(2, 1, 1, 4))


def test_score_statistics():
    for d in (16, 128):
        scaled, raw = score_statistics(d), score_statistics(d, scaled=False)
        assert abs(scaled.logit_std - 1) < 0.05
        assert abs(raw.logit_std / math.sqrt(d) - 1) < 0.05
        assert raw.max_prob > scaled.max_prob and raw.entropy_bits < scaled.entropy_bits
        assert raw.saturated > scaled.saturated == 0.0  # no scaled row is near one-hot
    raw = [score_statistics(d, scaled=False) for d in (16, 64, 128, 256)]
    # unscaled rows saturate more as d grows: larger top probability, more near-one-hot rows
    for a, b in zip(raw[:-1], raw[1:], strict=True):
        assert a.max_prob < b.max_prob and a.saturated < b.saturated and a.entropy_bits > b.entropy_bits


def test_softmax_gradient_vanishes_towards_one_hot():
    # d p / d z = diag(p) - p p^T; its column for logit j is p_j (e_j - p).
    for gap in (2.0, 8.0, 32.0):
        z = torch.tensor([gap, 0.0, 0.0, 0.0], dtype=torch.float64)
        p = torch.softmax(z, 0)
        jac = torch.diag(p) - torch.outer(p, p)
        assert torch.allclose(jac[:, 1], p[1] * (torch.eye(4, dtype=torch.float64)[1] - p))
    assert jac.abs().max() < 1e-12  # gap 32: p is one-hot to double precision, no gradient


@pytest.mark.parametrize("n_splits", [1, 3, 7])
def test_split_kv_attention_equals_one_pass(n_splits):
    from infralens.attention.gqa import split_kv_attention

    q, k, v = rand(2, 4, 1, 16), rand(2, 4, 50, 16), rand(2, 4, 50, 16)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(split_kv_attention(q, k, v, n_splits), ref, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S, n", [(12, 4), (13, 4), (7, 1), (9, 3)])
def test_ring_attention_equals_full_attention(S, n, causal):
    q, k, v = rand(2, 3, S, 8), rand(2, 3, S, 8), rand(2, 3, S, 8)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(ring_attention(q, k, v, n, causal=causal), ref, atol=1e-12)


@pytest.mark.parametrize("S_q", [1, 3])
def test_cascade_attention_equals_attention_over_prefix_and_own_tokens(S_q):
    B, h, P, S_own, d = 3, 2, 11, 5, 8
    q = rand(B, h, S_q, d)
    k_shared, v_shared = rand(h, P, d), rand(h, P, d)
    k_own, v_own = rand(B, h, S_own, d), rand(B, h, S_own, d)
    k_all = torch.cat([k_shared.expand(B, h, P, d), k_own], dim=-2)  # what each sequence sees
    v_all = torch.cat([v_shared.expand(B, h, P, d), v_own], dim=-2)
    ref = grouped_query_attention(q, k_all, v_all, causal=True)  # bottom-right: q are the last
    assert torch.allclose(cascade_attention(q, k_shared, v_shared, k_own, v_own), ref, atol=1e-12)


def test_partial_attention_of_a_fully_masked_row_is_the_empty_state():
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 4)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[1] = False
    out, lse = partial_attention(q, k, v, mask)
    assert torch.equal(out[..., 1, :], torch.zeros_like(out[..., 1, :]))
    assert torch.isinf(lse[..., 1]).all() and torch.isfinite(lse[..., [0, 2]]).all()
