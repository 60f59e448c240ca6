"""Which keys a query sees (visible, causal and sliding-window masks) and ALiBi."""

import pytest
import torch
import torch.nn.functional as F

from infralens.attention.masks import (
    alibi_bias,
    alibi_slopes,
    causal_mask,
    cu_seqlens,
    mask_text,
    packed_causal_mask,
    receptive_field,
    visible,
)


def test_square_causal_is_lower_triangular():
    assert torch.equal(causal_mask(5, 5), torch.ones(5, 5, dtype=torch.bool).tril())


def test_sdpa_is_causal_is_top_left_aligned():
    q, k, v = torch.randn(1, 1, 2, 4), torch.randn(1, 1, 6, 4), torch.randn(1, 1, 6, 4)
    top_left = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(2, 6, "top-left"))
    assert torch.allclose(F.scaled_dot_product_attention(q, k, v, is_causal=True), top_left)
    bottom_right = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(2, 6))
    assert not torch.allclose(top_left, bottom_right)
    assert causal_mask(1, 6).all()  # one decoding query sees the whole cache


def test_sliding_window_keeps_the_last_w_keys():
    m = causal_mask(10, 10, window=3)
    assert m.sum(-1).tolist() == [1, 2] + [3] * 8
    assert not m[9, 6] and m[9, 7]


def test_receptive_field_by_composing_masks():
    s, w, layers = 40, 4, 5
    step = causal_mask(s, s, window=w).to(torch.int64)
    reach = torch.eye(s, dtype=torch.int64)
    for _ in range(layers):
        reach = (step @ reach).clamp(max=1)
    farthest = max(i - int(torch.nonzero(reach[i])[0]) for i in range(s))
    assert farthest + 1 == receptive_field(w, layers)


def test_alibi():
    assert torch.allclose(alibi_slopes(8), torch.tensor([2.0**-k for k in range(1, 9)], dtype=torch.float64))
    bias = alibi_bias(4, 3, 5)
    assert bias.shape == (4, 3, 5)
    assert torch.all(bias[:, [0, 1, 2], [2, 3, 4]] == 0)  # each query's own position costs nothing
    assert bias[0, 2, 0] == -alibi_slopes(4)[0] * 4


def visible_by_loops(query_pos, key_pos, window=None):
    """The rule in words, one pair at a time: no key from the future, and with a window only
    the last ``window`` positions up to the query's own."""
    return [[k <= q and (window is None or q - k < window) for k in key_pos] for q in query_pos]


@pytest.mark.parametrize("window", [None, 1, 2, 5, 100])
@pytest.mark.parametrize("query_pos, key_pos", [
    (range(6), range(6)),          # prefill
    (range(7, 10), range(10)),     # a chunk after 7 cached tokens
    ([9], range(10)),              # one decoding step
    ([3, 0, 8], [8, 1, 3, 0]),     # positions in any order
    (range(4), range(2, 9)),       # keys that start later than the queries
])
def test_visible_matches_a_double_loop(query_pos, key_pos, window):
    got = visible(torch.tensor(list(query_pos)), torch.tensor(list(key_pos)), window)
    assert got.dtype == torch.bool and got.shape == (len(query_pos), len(key_pos))
    assert got.tolist() == visible_by_loops(query_pos, key_pos, window)


def test_causal_mask_is_visible_at_absolute_positions():
    for s_q, s_k, window in ((3, 8, None), (8, 8, 3), (1, 5, 2)):
        want = visible_by_loops(range(s_k - s_q, s_k), range(s_k), window)
        assert causal_mask(s_q, s_k, window=window).tolist() == want
        assert causal_mask(s_q, s_k, "top-left", window).tolist() == visible_by_loops(
            range(s_q), range(s_k), window)


def test_mask_text_draws_rows_of_queries():
    # Two new queries after four cached keys, bottom-right aligned: they see 5 and 6 keys.
    assert mask_text(causal_mask(2, 6)) == "# # # # # .\n# # # # # #"
    assert mask_text(causal_mask(2, 6, "top-left")) == "# . . . . .\n# # . . . ."
    assert mask_text(torch.tensor([[True]])) == "#" and mask_text(torch.tensor([[False]])) == "."


@pytest.mark.parametrize("mask", [causal_mask(8, 8, window=3), causal_mask(3, 7), causal_mask(5, 5)])
def test_mask_text_is_the_mask_symbol_by_symbol(mask):
    lines = mask_text(mask).split("\n")
    assert len(lines) == mask.shape[0]
    # one symbol per key, one space between: read back, it is the mask
    read_back = [[symbol == "#" for symbol in line.split(" ")] for line in lines]
    assert all(len(line) == 2 * mask.shape[1] - 1 for line in lines)
    assert read_back == mask.tolist()


def test_mask_text_of_an_empty_mask_is_empty():
    assert mask_text(torch.ones(0, 4, dtype=torch.bool)) == ""


def test_packed_sequences_attend_as_if_run_one_by_one():
    lengths = [3, 1, 5]
    assert cu_seqlens(lengths).tolist() == [0, 3, 4, 9]
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(2, 9, 4, generator=g, dtype=torch.float64) for _ in range(3))
    packed = F.scaled_dot_product_attention(q, k, v, attn_mask=packed_causal_mask(lengths))
    cu = cu_seqlens(lengths).tolist()
    one_by_one = torch.cat([F.scaled_dot_product_attention(q[:, a:b], k[:, a:b], v[:, a:b], is_causal=True)
                            for a, b in zip(cu, cu[1:], strict=False)], dim=1)
    assert torch.allclose(packed, one_by_one, atol=1e-12)
    assert int(packed_causal_mask(lengths).sum()) == sum(n * (n + 1) // 2 for n in lengths)


def test_cu_seqlens_rejects_empty_sequences():
    with pytest.raises(ValueError):
        cu_seqlens([3, 0])
