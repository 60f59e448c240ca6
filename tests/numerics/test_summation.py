"""The summation algorithms against independent references: a scalar NumPy loop, a float64 sum,
and Higham's error bounds."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from infralens.numerics import summation as S
from infralens.numerics.formats import FORMATS
from infralens.numerics.rounding import relative_error_bound


def test_naive_sum_is_the_left_to_right_float32_loop():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 257)).astype(np.float32)
    for row, got in zip(x, S.naive_sum(x), strict=True):
        s = np.float32(0)
        for v in row:
            s = np.float32(s + v)
        assert got == s


def test_pairwise_sum_is_the_balanced_tree():
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
    assert S.pairwise_sum(x)[0] == 15.0
    # a case where order matters: 2^24 + 0 + 1 + 1 in float32
    big = np.array([[2.0**24, 0.0, 1.0, 1.0]], dtype=np.float32)
    assert S.naive_sum(big)[0] == 2.0**24                       # each +1 is a tie, rounded away
    assert S.pairwise_sum(big)[0] == 2.0**24 + 2                # (2^24 + 0) + (1 + 1): exact


@pytest.mark.parametrize("dtype,key", [(np.float32, "fp32"), (ml_dtypes.bfloat16, "bf16"),
                                       (np.float16, "fp16")])
def test_errors_stay_within_highams_bounds(dtype, key):
    rng = np.random.default_rng(1)
    n = 4096
    x = rng.random((8, n)).astype(dtype)
    err = S.summation_errors(x)
    u = relative_error_bound(FORMATS[key])
    assert (err["naive"] <= S.gamma(n - 1, u)).all()
    assert (err["pairwise"] <= S.gamma(math.ceil(math.log2(n)), u)).all()
    # Kahan: 2u + O(n u^2), plus the final rounding of the result
    assert (err["kahan"] <= 3 * u + n * u * u).all()


def test_kahan_beats_the_running_total_in_bf16():
    x = np.full((1, 4096), 0.1, dtype=ml_dtypes.bfloat16)
    err = S.summation_errors(x)
    assert err["naive"][0] > 0.5 and err["kahan"][0] < relative_error_bound(FORMATS["bf16"])


def test_gamma():
    assert S.gamma(10, 2.0**-24) == pytest.approx(10 * 2.0**-24, rel=1e-6)
    assert S.gamma(2**24, 2.0**-24) == math.inf


def test_accumulate_at_fp32_precision_is_the_float32_running_total():
    rng = np.random.default_rng(2)
    terms = (rng.random((4, 1000)).astype(np.float32)).astype(np.float64)   # exact in float32
    ours = S.accumulate(terms, FORMATS["fp32"].mantissa_bits)
    assert ours.tolist() == S.naive_sum(terms.astype(np.float32)).astype(np.float64).tolist()


def test_accumulate_with_promotion_adds_chunk_sums_in_fp32():
    rng = np.random.default_rng(3)
    terms = rng.random((2, 300))
    got = S.accumulate(terms, 13, promote_every=128)
    chunks = [S.accumulate(terms[:, i:i + 128], 13) for i in range(0, 300, 128)]
    want = np.zeros(2)
    for c in chunks:
        want = np.float32(want + c).astype(np.float64)
    np.testing.assert_array_equal(got, want)
    exact = terms.sum(-1)
    assert (np.abs(got - exact) / exact < np.abs(S.accumulate(terms, 13) - exact) / exact + 1e-3).all()


def test_variances_against_float64():
    rng = np.random.default_rng(4)
    benign = rng.standard_normal((4, 1000)).astype(np.float32)
    exact = benign.astype(np.float64).var(axis=-1)
    for fn in (S.two_pass_variance, S.one_pass_variance, S.welford_variance):
        np.testing.assert_allclose(fn(benign), exact, rtol=1e-4)
    offset = (1e4 + rng.standard_normal((4, 1000))).astype(np.float32)
    exact = offset.astype(np.float64).var(axis=-1)
    rel = lambda v: np.abs(v - exact) / exact  # noqa: E731
    assert (rel(S.two_pass_variance(offset)) < 1e-5).all()
    assert (rel(S.welford_variance(offset)) < 1e-2).all()
    assert (rel(S.one_pass_variance(offset)) > 1e-1).any()          # catastrophic cancellation


def test_welford_merge_equals_the_statistics_of_the_concatenation():
    from infralens.numerics.summation import welford_merge

    rng = np.random.default_rng(3)
    x = rng.normal(5.0, 2.0, size=1000)
    parts = np.split(x, [1, 137, 600])  # uneven blocks, one of a single element
    state = (0, 0.0, 0.0)  # the empty sample
    for p in parts:
        state = welford_merge(state, (len(p), p.mean(), ((p - p.mean()) ** 2).sum()))
    n, mean, m2 = state
    assert n == len(x)
    assert np.isclose(mean, x.mean(), rtol=1e-14) and np.isclose(m2 / n, x.var(), rtol=1e-12)
    assert welford_merge((0, 0.0, 0.0), (0, 0.0, 0.0)) == (0, 0.0, 0.0)
