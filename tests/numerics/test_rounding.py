"""round_to against ml_dtypes' conversions (an independent implementation of the same rounding)
for every format it has, plus the ties, subnormal and overflow cases IEEE 754 defines."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from infralens.numerics.formats import FORMATS
from infralens.numerics.rounding import relative_error_bound, round_significand, round_to, ulp

ML_KEYS = [k for k, f in FORMATS.items() if f.ml_dtype and k != "fp64"]


def _ml(fmt):
    return getattr(ml_dtypes, fmt.ml_dtype, None) or np.dtype(fmt.ml_dtype)


@pytest.mark.parametrize("key", ML_KEYS)
def test_round_to_matches_ml_dtypes_over_the_whole_range(key):
    fmt = FORMATS[key]
    rnd = random.Random(key)
    lo, hi = math.log2(fmt.min_subnormal) - 2, math.log2(fmt.max_normal) + 0.5
    xs = np.array([rnd.choice((-1, 1)) * 2 ** rnd.uniform(lo, hi) for _ in range(4000)])
    # exact ties (halfway between neighbours) in the normal and subnormal ranges
    vals = [v for v in (fmt.finite_values() if fmt.bits <= 16 else []) if v > 0]
    ties = [(a + b) / 2 for a, b in zip(vals, vals[1:], strict=False)][:: max(1, len(vals) // 200)]
    xs = np.concatenate([xs, np.array(ties)])
    with np.errstate(over="ignore", invalid="ignore"):
        theirs = xs.astype(_ml(fmt)).astype(np.float64)
    for x, want in zip(xs.tolist(), theirs.tolist(), strict=True):
        got = round_to(x, fmt)
        assert got == want or (math.isnan(got) and math.isnan(want)), (key, x, got, want)


def test_ties_go_to_the_even_significand():
    bf16 = FORMATS["bf16"]
    eps = bf16.epsilon
    assert round_to(1 + eps / 2, bf16) == 1.0                 # 1 is even
    assert round_to(1 + 3 * eps / 2, bf16) == 1 + 2 * eps     # 1 + 2 eps is even
    assert round_to(-(1 + 3 * eps / 2), bf16) == -(1 + 2 * eps)
    # one part in 2^60 above the tie decides it
    assert round_to(Fraction(1) + Fraction(eps) / 2 + Fraction(1, 2**60), bf16) == 1 + eps


def test_gradual_underflow_and_overflow_rules():
    fp16, e4m3, e2m1 = FORMATS["fp16"], FORMATS["e4m3fn"], FORMATS["e2m1"]
    assert round_to(fp16.min_subnormal * 0.5, fp16) == 0.0           # tie with 0: even is 0
    assert round_to(fp16.min_subnormal * 0.75, fp16) == fp16.min_subnormal
    assert round_to(3 * fp16.min_subnormal, fp16) == 3 * fp16.min_subnormal   # exact subnormal
    assert round_to(1e6, fp16) == math.inf and round_to(-1e6, fp16) == -math.inf
    assert math.isnan(round_to(1e6, e4m3))                          # no infinity: NaN
    assert round_to(1e6, e4m3, saturate=True) == 448.0
    assert round_to(100.0, e2m1) == 6.0                             # MX: no specials, saturates
    assert round_to(0.0, FORMATS["e4m3fnuz"]) == 0.0
    assert math.copysign(1, round_to(-0.0, fp16)) == -1.0


def test_fma_example_needs_one_rounding():
    fp32 = FORMATS["fp32"]
    a, c = 1 + 2.0**-12, -(1 + 2.0**-11)
    exact = Fraction(a) ** 2 + Fraction(c)
    assert round_to(exact, fp32) == 2.0**-24
    assert round_to(Fraction(round_to(Fraction(a) ** 2, fp32)) + Fraction(c), fp32) == 0.0
    # numpy's float32 multiply then add rounds twice, like the unfused path
    assert float(np.float32(a) * np.float32(a) + np.float32(c)) == 0.0


def test_round_significand_equals_round_to_in_the_normal_range():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(2000) * 10.0 ** rng.uniform(-5, 5, 2000)
    for key in ("fp32", "bf16", "fp16"):
        fmt = FORMATS[key]
        x_in = x[(np.abs(x) >= fmt.min_normal) & (np.abs(x) <= fmt.max_normal / 2)]
        ours = round_significand(x_in, fmt.mantissa_bits)
        assert ours.tolist() == [round_to(v, fmt) for v in x_in.tolist()]
    assert round_significand(np.array([2.0**40 + 1]), 3)[0] == 2.0**40   # no range limit


def test_ulp_and_unit_roundoff():
    bf16 = FORMATS["bf16"]
    assert ulp(1.0, bf16) == bf16.epsilon and ulp(3.0, bf16) == 2 * bf16.epsilon
    assert ulp(0.0, bf16) == bf16.min_subnormal == ulp(bf16.min_subnormal, bf16)
    assert relative_error_bound(FORMATS["fp32"]) == 2.0**-24
    # the bound holds for random values in the normal range
    rng = np.random.default_rng(1)
    for v in rng.uniform(1, 1e4, 500).tolist():
        assert abs(round_to(v, bf16) - v) <= relative_error_bound(bf16) * v


def test_non_finite_input_is_refused():
    with pytest.raises(ValueError, match="exact rational"):
        round_to(math.inf, FORMATS["fp16"])
