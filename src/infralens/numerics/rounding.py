"""Rounding an exact real number to a format, the one operation every floating-point result is.

IEEE 754 defines each basic operation (+, -, x, /, sqrt and the fused multiply-add) as the exact
result, rounded once to the destination format {cite}`ieee2019standard`. :func:`round_to` is that
rounding, done on an exact rational (:class:`fractions.Fraction`), for any
:class:`~infralens.numerics.formats.FloatFormat`: round to nearest, ties to even, with gradual
underflow into the subnormals and the format's own rule at overflow. With it a page can compute
what a format *should* give and compare it with what a library or a GPU gives.

* :func:`round_to`: the nearest value of a format, ties to the even significand.
* :func:`round_significand`: many float64 values rounded to a number of significand bits at
  once (no range limits), to emulate a narrow accumulator.
* :func:`ulp`: the gap between a format's value and the next one away from zero.
* :func:`relative_error_bound`: the unit roundoff ``u = 2^-(m+1)``, the bound on ``|delta|`` in
  ``fl(a op b) = (a op b)(1 + delta)`` for results in the normal range.
"""

from __future__ import annotations

import math
from fractions import Fraction
from numbers import Rational

from infralens.numerics.formats import FloatFormat

__all__ = ["round_to", "round_significand", "ulp", "relative_error_bound", "exact"]


def exact(x: float | int | Fraction) -> Fraction:
    """``x`` as an exact rational (a float is converted without rounding)."""
    if isinstance(x, Rational):
        return Fraction(x)
    if not math.isfinite(x):
        raise ValueError(f"{x!r} has no exact rational value")
    return Fraction(x)


def _floor_log2(a: Fraction) -> int:
    """floor(log2(a)) for a positive rational, exactly."""
    e = a.numerator.bit_length() - a.denominator.bit_length()
    # 2^e <= a < 2^(e+1) after at most one correction each way
    if a < Fraction(2) ** e:
        e -= 1
    elif a >= Fraction(2) ** (e + 1):
        e += 1
    return e


# [numerics:round-to]
def round_to(x: float | int | Fraction, fmt: FloatFormat, saturate: bool = False) -> float:
    """The value of ``fmt`` nearest to ``x``, ties to the even significand (IEEE 754's default).

    ``x`` is taken exactly. Results below the smallest normal value are rounded on the subnormal
    grid (gradual underflow); a result that rounds above the largest finite value becomes
    infinity where the format has one, NaN where it has only NaN, and the largest value under
    ``"mx"`` (no special values) or when ``saturate`` is set (the clamp FP8 recipes apply).
    Returns a float: every format here is exactly representable in binary64.
    """
    q = exact(x)
    if q == 0:
        return math.copysign(0.0, x) if isinstance(x, float) else 0.0
    sign = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = max(_floor_log2(a), fmt.emin)            # the binade, floored at the subnormal one
    quantum = Fraction(2) ** (e - fmt.mantissa_bits)
    n = round(a / quantum)                       # Fraction.__round__: ties to even
    value = n * quantum
    if value > Fraction(fmt.max_normal):         # overflow, decided after rounding
        if saturate or fmt.specials == "mx":
            return sign * fmt.max_normal
        return sign * math.inf if fmt.has_infinity else math.nan
    if value == 0 and not fmt.has_negative_zero:
        return 0.0
    return sign * float(value)
# [/numerics:round-to]


def ulp(x: float, fmt: FloatFormat) -> float:
    """The spacing of ``fmt`` at ``x``: ``2^(e - m)`` in the binade ``2^e <= |x| < 2^(e+1)``,
    and the subnormal spacing below the smallest normal value."""
    a = abs(exact(x))
    e = fmt.emin if a == 0 else max(_floor_log2(a), fmt.emin)
    return math.ldexp(1.0, e - fmt.mantissa_bits)


def relative_error_bound(fmt: FloatFormat) -> float:
    """The unit roundoff ``u = epsilon / 2 = 2^-(m+1)``: for a result in the normal range,
    round to nearest gives ``fl(z) = z (1 + delta)`` with ``|delta| <= u``."""
    return fmt.epsilon / 2


# [numerics:round-significand]
def round_significand(x, mantissa_bits: int):
    """Round float64 values (a NumPy array) to ``mantissa_bits`` fraction bits, ties to even,
    with an unbounded exponent: the precision of a format without its range limits, which is
    how an accumulator narrower than FP32 is emulated."""
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    mant, exp = np.frexp(x)                           # x = mant * 2^exp, 0.5 <= |mant| < 1
    scaled = np.ldexp(mant, mantissa_bits + 1)        # the significand as an integer part
    return np.ldexp(np.rint(scaled), exp - mantissa_bits - 1)   # np.rint: ties to even
# [/numerics:round-significand]
