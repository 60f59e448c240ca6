"""Online softmax and the merge rule against torch.softmax and logsumexp in float64."""

import math

import pytest
import torch

from infralens.attention.online_softmax import (
    SoftmaxState,
    merge_states,
    online_softmax,
    online_softmax_blocks,
    online_softmax_one,
)


def test_online_softmax_one_element_and_blocks():
    x = 5 * torch.randn(1001, dtype=torch.float64)
    m, l = x.max().item(), torch.exp(x - x.max()).sum().item()
    for state in (online_softmax_one(x.tolist()),
                  *(online_softmax_blocks(x, b) for b in (1, 7, 64, 1001, 5000))):
        assert state.m == m and state.l == pytest.approx(l, rel=1e-13)
    want = torch.softmax(x, dim=0)
    for block in (None, 1, 13, 1001):
        torch.testing.assert_close(online_softmax(x, block), want, rtol=1e-13, atol=1e-15)


def test_online_softmax_survives_values_that_overflow_exp():
    x = torch.tensor([1000.0, 999.0, -1000.0], dtype=torch.float64)  # exp(1000) = inf
    torch.testing.assert_close(online_softmax(x), torch.softmax(x, 0), rtol=0, atol=1e-15)


def test_merge_is_associative_commutative_with_an_identity():
    g = torch.Generator().manual_seed(3)
    parts = [torch.randn(n, generator=g, dtype=torch.float64) * 4 for n in (5, 9, 2)]
    a, b, c = (online_softmax_one(p.tolist()) for p in parts)
    empty = SoftmaxState(-math.inf, 0.0)
    left, right = merge_states(merge_states(a, b), c), merge_states(a, merge_states(b, c))
    assert left.m == right.m and left.l == pytest.approx(right.l, rel=1e-14)
    ab, ba = merge_states(a, b), merge_states(b, a)
    assert ab.m == ba.m and ab.l == pytest.approx(ba.l, rel=1e-14)
    assert merge_states(empty, a) == a
    whole = online_softmax_one(torch.cat(parts).tolist())
    assert left.m == whole.m and left.l == pytest.approx(whole.l, rel=1e-14)


def test_state_is_the_logsumexp():
    # m + log(l) is log(sum(exp(x))) whatever the order of the elements or the block size.
    x = 20 * torch.randn(257, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    want = torch.logsumexp(x, 0).item()
    for state in (online_softmax_one(x.tolist()), online_softmax_one(x.flip(0).tolist()),
                  online_softmax_blocks(x, 10)):
        assert state.m + math.log(state.l) == pytest.approx(want, rel=1e-14)


def test_empty_sequence_is_the_identity_state():
    assert online_softmax_one([]) == SoftmaxState(-math.inf, 0.0)
