"""Summing many numbers in a short format: the order of the additions sets the error.

Each function sums the rows of a NumPy array with every addition rounded to the array's dtype
(float16, float32, or ``ml_dtypes.bfloat16``), as a kernel that accumulates in that type would.
The bounds are Higham's {cite}`higham2002accuracy` (chapter 4), with ``u`` the unit roundoff
and ``gamma_k = k u / (1 - k u)``:

* :func:`naive_sum`: one running total, ``|error| <= gamma_(n-1) sum |x_i|``;
* :func:`pairwise_sum`: a balanced tree of additions, ``|error| <= gamma_ceil(log2 n) sum |x_i|``;
* :func:`kahan_sum`: a running total and a compensation term that carries the low-order bits
  each addition drops {cite}`kahan1965further`, ``|error| <= (2u + O(n u^2)) sum |x_i|``;
* :func:`accumulate`: a dot product's running sum held at a chosen number of significand bits,
  optionally promoted into an FP32 total every few terms, as an FP8 GEMM that keeps its
  Tensor-Core partial sums short and adds them on the CUDA cores does
  {cite}`deepseekai2024deepseekv3`;
* :func:`two_pass_variance`, :func:`one_pass_variance` and :func:`welford_variance`: the three
  ways to compute a variance, which differ by orders of magnitude when the mean is large.

:func:`summation_errors` measures all three sums against a float64 sum of the same values.
"""

from __future__ import annotations

import math

import numpy as np

#: DeepSeek-V3 on H800 FP8 GEMMs: the Tensor Cores' accumulation keeps "around 14 bits", and
#: their fix promotes the partial sums to FP32 every 128 elements of K (section 3.3.2)
#: {cite}`deepseekai2024deepseekv3`.
FP8_TC_ACCUMULATOR_BITS = 14
DEEPSEEK_V3_PROMOTION_INTERVAL = 128

__all__ = ["FP8_TC_ACCUMULATOR_BITS", "DEEPSEEK_V3_PROMOTION_INTERVAL", "accumulate", "naive_sum",
           "pairwise_sum", "kahan_sum", "gamma", "summation_errors",
           "two_pass_variance", "one_pass_variance", "welford_variance",
           "welford_merge"]


def gamma(k: int, u: float) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``: the bound on ``|prod (1 + delta_i) - 1|`` over
    ``k`` roundings, each ``|delta_i| <= u`` (valid while ``k u < 1``)."""
    if k * u >= 1:
        return math.inf
    return k * u / (1 - k * u)


# [numerics:naive-sum]
def naive_sum(x: np.ndarray) -> np.ndarray:
    """Sum each row left to right into one total of x's dtype: s = s + x_i, rounded each time."""
    s = np.zeros(x.shape[:-1], dtype=x.dtype)
    for i in range(x.shape[-1]):
        s = (s + x[..., i]).astype(x.dtype)
    return s
# [/numerics:naive-sum]


# [numerics:pairwise-sum]
def pairwise_sum(x: np.ndarray) -> np.ndarray:
    """Sum each row as a balanced binary tree: add neighbours, halve the length, repeat."""
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:                      # an odd element waits a level (adding 0 is exact)
            x = np.concatenate([x, np.zeros_like(x[..., :1])], axis=-1)
        x = (x[..., 0::2] + x[..., 1::2]).astype(x.dtype)
    return x[..., 0]
# [/numerics:pairwise-sum]


# [numerics:kahan-sum]
def kahan_sum(x: np.ndarray) -> np.ndarray:
    """Compensated summation: c holds what the last addition to s lost, and is added back."""
    s = np.zeros(x.shape[:-1], dtype=x.dtype)
    c = np.zeros_like(s)
    for i in range(x.shape[-1]):
        y = (x[..., i] - c).astype(x.dtype)      # the next term, corrected by the last loss
        t = (s + y).astype(x.dtype)              # the new total: low bits of y are lost here
        c = ((t - s).astype(x.dtype) - y).astype(x.dtype)   # (what was added) - y = -(lost bits)
        s = t
    return s
# [/numerics:kahan-sum]


def summation_errors(x: np.ndarray) -> dict[str, np.ndarray]:
    """Relative error of each sum of the rows of ``x`` against the float64 sum of the same
    (already rounded) values: ``|sum - exact| / sum |x_i|`` per row, keyed by method.

    The float64 sum is exact enough as a reference while ``n * 2^-53`` is far below the errors
    measured (rows of at most millions of values)."""
    ref = x.astype(np.float64).sum(axis=-1)
    scale = np.abs(x.astype(np.float64)).sum(axis=-1)
    out = {}
    for name, fn in (("naive", naive_sum), ("pairwise", pairwise_sum), ("kahan", kahan_sum)):
        out[name] = np.abs(fn(x).astype(np.float64) - ref) / scale
    return out


def two_pass_variance(x: np.ndarray) -> np.ndarray:
    """Mean first, then the mean of squared deviations (population variance), in x's dtype."""
    n = x.shape[-1]
    mean = (pairwise_sum(x) / x.dtype.type(n)).astype(x.dtype)
    d = (x - mean[..., None]).astype(x.dtype)
    return (pairwise_sum((d * d).astype(x.dtype)) / x.dtype.type(n)).astype(x.dtype)


def one_pass_variance(x: np.ndarray) -> np.ndarray:
    """E[x^2] - E[x]^2 in one pass, in x's dtype: two large, nearly equal numbers subtracted."""
    n = x.dtype.type(x.shape[-1])
    mean = (pairwise_sum(x) / n).astype(x.dtype)
    mean_sq = (pairwise_sum((x * x).astype(x.dtype)) / n).astype(x.dtype)
    return (mean_sq - (mean * mean).astype(x.dtype)).astype(x.dtype)


# [numerics:welford]
def welford_variance(x: np.ndarray) -> np.ndarray:
    """One pass that updates the mean and the sum of squared deviations per element
    (Welford), in x's dtype: every subtraction is of a value and a nearby mean."""
    mean = np.zeros(x.shape[:-1], dtype=x.dtype)
    m2 = np.zeros_like(mean)
    for i in range(x.shape[-1]):
        xi = x[..., i]
        delta = (xi - mean).astype(x.dtype)
        mean = (mean + (delta / x.dtype.type(i + 1)).astype(x.dtype)).astype(x.dtype)
        m2 = (m2 + (delta * (xi - mean).astype(x.dtype)).astype(x.dtype)).astype(x.dtype)
    return (m2 / x.dtype.type(x.shape[-1])).astype(x.dtype)
# [/numerics:welford]


# [numerics:welford-merge]
def welford_merge(a: tuple[float, float, float], b: tuple[float, float, float]) -> tuple[float, float, float]:
    """(count, mean, M2) of two samples together from each sample's (count, mean, M2), where M2 is
    the sum of squared deviations from the mean (Chan, Golub and LeVeque): the combine step of a
    parallel or blocked Welford reduction. The variance is M2 / count."""
    n_a, mean_a, m2_a = a
    n_b, mean_b, m2_b = b
    n = n_a + n_b
    if n == 0:
        return 0, 0.0, 0.0
    delta = mean_b - mean_a
    mean = mean_a + delta * n_b / n  # the weighted mean, written as a correction of mean_a
    return n, mean, m2_a + m2_b + delta * delta * n_a * n_b / n  # the spread between the two means
# [/numerics:welford-merge]


# [numerics:accumulate]
def accumulate(terms: np.ndarray, mantissa_bits: int, promote_every: int | None = None
               ) -> np.ndarray:
    """Sum the rows of float64 ``terms`` (exact products) into an accumulator rounded to
    ``mantissa_bits`` after every addition. With ``promote_every = k`` the narrow accumulator
    restarts every k terms and each partial sum is added into an FP32 total."""
    from infralens.numerics.rounding import round_significand

    fp32_bits = 23
    total = np.zeros(terms.shape[:-1])
    part = np.zeros_like(total)
    for i in range(terms.shape[-1]):
        part = round_significand(part + terms[..., i], mantissa_bits)
        if promote_every and (i + 1) % promote_every == 0:
            total = round_significand(total + part, fp32_bits)
            part = np.zeros_like(total)
    if not promote_every:
        return part
    return round_significand(total + part, fp32_bits)
# [/numerics:accumulate]
