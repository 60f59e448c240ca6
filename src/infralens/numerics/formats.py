"""Binary floating-point formats, from their bit definitions to their ranges.

A format is one sign bit, ``e`` exponent bits, ``m`` mantissa (fraction) bits, an exponent
``bias`` and a convention for the special values. A pattern with biased exponent ``E`` and
fraction ``M`` means

* ``(-1)^s * 2^(E - bias) * (1 + M / 2^m)`` when ``E > 0`` (a normal number), and
* ``(-1)^s * 2^(1 - bias) * (M / 2^m)`` when ``E == 0`` (zero or a subnormal number),

unless the convention reserves the pattern:

``"ieee"`` (IEEE 754: FP32, FP16, BF16, TF32, OCP E5M2)
    The all-ones exponent is reserved: fraction zero is +-infinity, any other fraction a NaN.
``"fn"`` (OCP E4M3, "finite"): no infinities
    Only the patterns with every exponent and fraction bit set are NaN (one per sign); the rest
    of the all-ones exponent holds normal numbers, one more binade than IEEE would give.
``"fnuz"`` ("finite, unsigned zero": E4M3FNUZ, E5M2FNUZ): no infinities and no negative zero
    The pattern of -0 (sign bit alone, 0x80) is the only NaN; every exponent, all ones included,
    holds normal numbers, and the bias is one more than IEEE's ``2^(e-1) - 1``.
``"mx"`` (the OCP Microscaling element formats FP6 E2M3, FP6 E3M2 and FP4 E2M1): no infinities
    and no NaN; every pattern is a number. The block's shared scale carries the special values.

Everything below is computed from those five numbers; nothing is typed in twice. The tests check
the results against ``torch.finfo``, against the value torch decodes for every 8- and 16-bit
pattern, and against the values the OCP FP8 specification tabulates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["CONVENTIONS", "FloatFormat", "FORMATS", "FP8_FORMATS", "MX_BLOCK_SIZE", "MX_SCALE_BITS",
           "fmt_power_of_two",
           "formats_table_markdown", "finfo_disagreements"]

#: The special-value conventions, with what each reserves (used in the table's last column).
CONVENTIONS: Mapping[str, str] = MappingProxyType({
    "ieee": "±∞ and NaN in the all-ones exponent",
    "fn": "no ∞; NaN only where every exponent and mantissa bit is set",
    "fnuz": "no ∞ and no −0; NaN is the −0 pattern (sign bit alone)",
    "mx": "no ∞ and no NaN: every pattern is a number",
})


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign, exponent and mantissa bits, bias, special values.

    ``source`` is the BibTeX key of the document that defines it; ``torch_dtype`` the name of
    the matching ``torch`` dtype, where one exists (TF32 has none: it is a Tensor-Core input
    format, stored in FP32 registers and memory), and ``ml_dtype`` the name of the matching
    NumPy or ``ml_dtypes`` type (the MX element formats have one there but not in torch).
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int
    specials: str
    source: str
    torch_dtype: str | None = None
    note: str = ""
    ml_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.specials not in CONVENTIONS:
            raise ValueError(f"specials must be one of {tuple(CONVENTIONS)}, got {self.specials!r}")
        if self.exponent_bits < 2 or self.mantissa_bits < 1:
            raise ValueError("a format needs at least 2 exponent bits and 1 mantissa bit")

    # --- the bit layout ---------------------------------------------------------------------
    @property
    def bits(self) -> int:
        """Total width: sign + exponent + mantissa."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def _exp_all_ones(self) -> int:
        return (1 << self.exponent_bits) - 1

    @property
    def _frac_all_ones(self) -> int:
        return (1 << self.mantissa_bits) - 1

    # [numerics:range]
    @property
    def max_biased_exponent(self) -> int:
        """The largest biased exponent that still holds finite numbers: IEEE reserves the
        all-ones exponent for infinities and NaNs; "fn", "fnuz" and "mx" use it for numbers."""
        return self._exp_all_ones - 1 if self.specials == "ieee" else self._exp_all_ones

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest binade."""
        return self.max_biased_exponent - self.bias

    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal binade: biased exponent 1."""
        return 1 - self.bias

    @property
    def max_normal(self) -> float:
        """The largest finite value. In the top binade every fraction is a number, except under
        "fn", where the all-ones fraction is the NaN."""
        top_fraction = self._frac_all_ones - (1 if self.specials == "fn" else 0)
        return math.ldexp(1 + top_fraction / (1 << self.mantissa_bits), self.emax)

    @property
    def min_normal(self) -> float:
        """The smallest positive normal value, 2^emin."""
        return math.ldexp(1.0, self.emin)

    @property
    def max_subnormal(self) -> float:
        """The largest subnormal value, (1 - 2^-m) * 2^emin."""
        return math.ldexp(self._frac_all_ones, self.emin - self.mantissa_bits)

    @property
    def min_subnormal(self) -> float:
        """The smallest positive value, 2^(emin - m): one unit in the last place of the
        subnormal binade."""
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def epsilon(self) -> float:
        """Machine epsilon: the gap between 1 and the next larger value, 2^-m."""
        return math.ldexp(1.0, -self.mantissa_bits)
    # [/numerics:range]

    @property
    def has_infinity(self) -> bool:
        return self.specials == "ieee"

    @property
    def has_negative_zero(self) -> bool:
        return self.specials != "fnuz"

    # --- every bit pattern --------------------------------------------------------------------
    # [numerics:decode]
    def decode(self, code: int) -> float:
        """The value of the bit pattern ``code`` (an unsigned integer of :attr:`bits` bits)."""
        if not 0 <= code < (1 << self.bits):
            raise ValueError(f"{self.name}: code must be in [0, 2^{self.bits}), got {code}")
        m = self.mantissa_bits
        sign = -1.0 if code >> (self.bits - 1) else 1.0
        exponent = (code >> m) & self._exp_all_ones
        fraction = code & self._frac_all_ones
        if self.specials == "fnuz" and code == 1 << (self.bits - 1):
            return math.nan                                   # the -0 pattern
        if exponent == self._exp_all_ones:
            if self.specials == "ieee":
                return sign * math.inf if fraction == 0 else math.nan
            if self.specials == "fn" and fraction == self._frac_all_ones:
                return math.nan
        if exponent == 0:                                     # zero and the subnormals
            return sign * math.ldexp(fraction, self.emin - m)
        return sign * math.ldexp((1 << m) + fraction, exponent - self.bias - m)
    # [/numerics:decode]

    def nan_codes(self) -> list[int]:
        """Every bit pattern that decodes to NaN (only for formats of at most 16 bits)."""
        return [c for c in self._codes() if math.isnan(self.decode(c))]

    def finite_values(self) -> list[float]:
        """Every finite value, sorted, each once (-0 and +0 count as one; at most 16 bits)."""
        vals = {self.decode(c) for c in self._codes()}
        return sorted(v for v in vals if math.isfinite(v))

    def _codes(self) -> range:
        if self.bits > 16:
            raise ValueError(f"{self.name}: enumerating 2^{self.bits} patterns is too many")
        return range(1 << self.bits)


def _fmt(name, e, m, bias, specials, source, torch_dtype=None, note="", ml_dtype=None):
    return FloatFormat(name, e, m, bias, specials, source, torch_dtype, note,
                       ml_dtype or torch_dtype)


# [numerics:formats]
FORMATS: Mapping[str, FloatFormat] = MappingProxyType({
    "fp64": _fmt("FP64", 11, 52, 1023, "ieee", "ieee2019standard", "float64",
                 "IEEE 754 binary64."),
    "fp32": _fmt("FP32", 8, 23, 127, "ieee", "ieee2019standard", "float32",
                 "IEEE 754 binary32."),
    "tf32": _fmt("TF32", 8, 10, 127, "ieee", "nvidia2020a100whitepaper", None,
                 "FP32's range with FP16's 10 mantissa bits: the Tensor Cores read FP32 operands "
                 "and use their top 10 mantissa bits; TF32 has no storage format of its own."),
    "bf16": _fmt("BF16", 8, 7, 127, "ieee", "kalamkar2019study", "bfloat16",
                 "The upper half of an FP32: its exponent, 7 of its 23 mantissa bits."),
    "fp16": _fmt("FP16", 5, 10, 15, "ieee", "ieee2019standard", "float16",
                 "IEEE 754 binary16."),
    "e5m2": _fmt("FP8 E5M2", 5, 2, 15, "ieee", "ocp2023ofp8", "float8_e5m2",
                 "OCP FP8; follows IEEE 754 conventions (infinities and NaNs)."),
    "e4m3fn": _fmt("FP8 E4M3", 4, 3, 7, "fn", "ocp2023ofp8", "float8_e4m3fn",
                   "OCP FP8; no infinities, one NaN pattern per sign."),
    "e5m2fnuz": _fmt("FP8 E5M2FNUZ", 5, 2, 16, "fnuz", "noune2022bit", "float8_e5m2fnuz",
                     "Bias 16 (IEEE would give 15), no infinities, no -0; NaN is 0x80."),
    "e4m3fnuz": _fmt("FP8 E4M3FNUZ", 4, 3, 8, "fnuz", "noune2022bit", "float8_e4m3fnuz",
                     "Bias 8 (IEEE would give 7), no infinities, no -0; NaN is 0x80."),
    "e3m2": _fmt("FP6 E3M2", 3, 2, 3, "mx", "ocp2023mx", None,
                 "OCP MX element format; no infinities or NaN.", "float6_e3m2fn"),
    "e2m3": _fmt("FP6 E2M3", 2, 3, 1, "mx", "ocp2023mx", None,
                 "OCP MX element format; no infinities or NaN.", "float6_e2m3fn"),
    "e2m1": _fmt("FP4 E2M1", 2, 1, 1, "mx", "ocp2023mx", None,
                 "OCP MX element format; no infinities or NaN.", "float4_e2m1fn"),
})
# [/numerics:formats]

#: OCP MX: the number of elements that share one scale, and the scale's format (E8M0: an
#: unsigned power of two, 8 exponent bits, bias 127) {cite}`ocp2023mx`.
MX_BLOCK_SIZE = 32
MX_SCALE_BITS = 8

#: The 8-bit formats, in the order of :data:`FORMATS`.
FP8_FORMATS: tuple[str, ...] = tuple(k for k, f in FORMATS.items() if f.bits == 8)


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_power_of_two(x: float, math_role: bool = True) -> str:
    """An exact power of two as a MyST math role, 2**-9 -> '{math}`2^{-9}`', or with
    ``math_role=False`` as plain text for glued prose, '2⁻⁹'."""
    mant, exp = math.frexp(x)
    if x <= 0 or mant != 0.5:
        raise ValueError(f"{x!r} is not a positive power of two")
    if not math_role:
        return "2" + str(exp - 1).translate(_SUPERSCRIPT)
    return f"{{math}}`2^{{{exp - 1}}}`"


def _fmt_largest(x: float) -> str:
    """Largest finite value: digits up to a million, otherwise a x 10^k in a math role."""
    if x < 1e6:
        return f"{x:,.0f}" if x == int(x) else f"{x:,g}"
    exp = math.floor(math.log10(x))
    return f"{{math}}`{x / 10**exp:.2f} \\times 10^{{{exp}}}`"


def formats_table_markdown(keys: Iterable[str] | None = None, cite: bool = True) -> str:
    """The formats as a MyST table: bits, bias, largest finite, smallest normal, smallest
    subnormal, epsilon and the special-value convention, each computed from the bit definition.

    Render it from an executed cell with ``IPython.display.Markdown(...)``.
    """
    from infralens.tools.glue import markdown_table

    keys = list(FORMATS if keys is None else keys)
    header = ["Format", "Sign · exponent · mantissa bits", "Bias", "Largest finite",
              "Smallest normal", "Smallest subnormal", "Epsilon", "Infinity and NaN"]
    rows = []
    for key in keys:
        f = FORMATS[key]
        name = f.name + (f" {{cite:p}}`{f.source}`" if cite else "")
        rows.append([name, f"1 · {f.exponent_bits} · {f.mantissa_bits}", str(f.bias),
                     _fmt_largest(f.max_normal), fmt_power_of_two(f.min_normal),
                     fmt_power_of_two(f.min_subnormal), fmt_power_of_two(f.epsilon),
                     CONVENTIONS[f.specials]])
    return markdown_table(header, rows)


def finfo_disagreements(keys: Iterable[str] | None = None) -> list[tuple[str, str, float, float]]:
    """Where ``torch.finfo`` disagrees with the bit definition: (format key, field, value from
    the definition, torch's value), for ``max``, ``smallest_normal`` and ``eps``.

    Imports torch. Formats without a torch dtype (TF32) are skipped.
    """
    import torch

    out = []
    for key in FORMATS if keys is None else keys:
        f = FORMATS[key]
        if f.torch_dtype is None:
            continue
        fi = torch.finfo(getattr(torch, f.torch_dtype))
        for field, ours in (("max", f.max_normal), ("smallest_normal", f.min_normal),
                            ("eps", f.epsilon)):
            theirs = float(getattr(fi, field))
            if theirs != ours:
                out.append((key, field, ours, theirs))
    return out
