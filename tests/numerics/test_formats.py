"""The ranges computed from each format's bits, against three independent references: the values
the OCP FP8 specification and IEEE 754 tabulate, ``torch.finfo``, and the value torch decodes for
every bit pattern of the 8- and 16-bit formats."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from infralens.numerics import formats as F
from infralens.numerics.formats import FORMATS, FP8_FORMATS, FloatFormat

TORCH_FORMATS = [k for k, f in FORMATS.items() if f.torch_dtype is not None]
BIB_DIR = Path(__file__).resolve().parents[2] / "conf" / "bib"


def _torch_values(fmt: FloatFormat) -> torch.Tensor:
    """Every bit pattern of an 8- or 16-bit format, decoded by torch, as float64."""
    codes = torch.arange(1 << fmt.bits, dtype=torch.int32)
    raw = codes.to(torch.uint8) if fmt.bits == 8 else codes.to(torch.int16)
    return raw.view(getattr(torch, fmt.torch_dtype)).to(torch.float64)


# --- published values ------------------------------------------------------------------------

# OCP 8-bit Floating Point Specification (OFP8) rev. 1.0, Tables 1 and 2: bias, emax, emin,
# max normal, min normal, max subnormal, min subnormal, as the specification writes them.
OCP = {
    "e4m3fn": dict(bias=7, emax=8, emin=-6, max_normal=1.75 * 2**8, min_normal=2**-6,
                   max_subnormal=0.875 * 2**-6, min_subnormal=2**-9),
    "e5m2": dict(bias=15, emax=15, emin=-14, max_normal=1.75 * 2**15, min_normal=2**-14,
                 max_subnormal=0.75 * 2**-14, min_subnormal=2**-16),
}


@pytest.mark.parametrize("key", list(OCP))
def test_ocp_fp8_tables(key):
    fmt = FORMATS[key]
    for field, value in OCP[key].items():
        assert getattr(fmt, field) == value, (key, field)
    # The specification's headline numbers.
    assert FORMATS["e4m3fn"].max_normal == 448 and FORMATS["e5m2"].max_normal == 57344


def test_ocp_nan_and_infinity_encodings():
    # E4M3: NaN only S.1111.111, no infinities. E5M2: infinities S.11111.00, NaN S.11111.{01,10,11}.
    e4m3, e5m2 = FORMATS["e4m3fn"], FORMATS["e5m2"]
    assert e4m3.nan_codes() == [0b0_1111_111, 0b1_1111_111]
    assert not e4m3.has_infinity and not any(math.isinf(e4m3.decode(c)) for c in range(256))
    assert e5m2.decode(0b0_11111_00) == math.inf and e5m2.decode(0b1_11111_00) == -math.inf
    assert e5m2.nan_codes() == [0b0_11111_01, 0b0_11111_10, 0b0_11111_11,
                                0b1_11111_01, 0b1_11111_10, 0b1_11111_11]


def test_fnuz_formats_have_one_nan_at_the_negative_zero_pattern_and_one_zero():
    for key in ("e4m3fnuz", "e5m2fnuz"):
        fmt = FORMATS[key]
        assert fmt.nan_codes() == [0x80]
        assert not fmt.has_infinity and not fmt.has_negative_zero
        zeros = [c for c in range(256) if fmt.decode(c) == 0]
        assert zeros == [0x00]
        # 255 finite patterns, symmetric about the single zero: 127 positive values.
        assert len(fmt.finite_values()) == 255
    # Their largest values: 240 and 57344 (LLVM APFloat, torch).
    assert FORMATS["e4m3fnuz"].max_normal == 240 and FORMATS["e5m2fnuz"].max_normal == 57344


def test_ieee_binary16_and_binary32_closed_forms():
    fp16, fp32 = FORMATS["fp16"], FORMATS["fp32"]
    assert (fp16.max_normal, fp16.min_normal, fp16.min_subnormal, fp16.epsilon) == (
        65504.0, 2**-14, 2**-24, 2**-10)
    assert fp32.max_normal == (2 - 2**-23) * 2.0**127
    assert (fp32.min_normal, fp32.min_subnormal, fp32.epsilon) == (2**-126, 2**-149, 2**-23)


def test_tf32_is_fp32_range_with_fp16_precision():
    tf32, fp32, fp16 = FORMATS["tf32"], FORMATS["fp32"], FORMATS["fp16"]
    assert (tf32.exponent_bits, tf32.bias, tf32.emax, tf32.emin) == (
        fp32.exponent_bits, fp32.bias, fp32.emax, fp32.emin)
    assert tf32.epsilon == fp16.epsilon and tf32.bits == 19
    assert tf32.max_normal == (2 - 2**-10) * 2.0**127
    assert tf32.torch_dtype is None


def test_bf16_is_the_top_half_of_fp32():
    # A BF16 pattern shifted left by 16 is the FP32 pattern of the same value.
    import struct
    bf16 = FORMATS["bf16"]
    for code in (0x0001, 0x007F, 0x0080, 0x3F80, 0x7F7F, 0x7F80, 0xC2F7, 0xFF80):
        want = struct.unpack("<f", struct.pack("<I", code << 16))[0]
        got = bf16.decode(code)
        assert got == want or (math.isnan(got) and math.isnan(want)), hex(code)


# --- torch.finfo -------------------------------------------------------------------------------

@pytest.mark.parametrize("key", TORCH_FORMATS)
def test_against_torch_finfo(key):
    fmt = FORMATS[key]
    fi = torch.finfo(getattr(torch, fmt.torch_dtype))
    assert fmt.bits == fi.bits
    assert fmt.max_normal == fi.max and -fmt.max_normal == fi.min
    assert fmt.min_normal == fi.smallest_normal == fi.tiny
    if key == "e5m2fnuz":
        # torch.finfo reports half the spacing above 1 that torch's own decoding of the format
        # shows (see test_e5m2fnuz_finfo_eps_is_half_the_spacing_above_one).
        assert fi.eps in (fmt.epsilon, fmt.epsilon / 2)
    else:
        assert fmt.epsilon == fi.eps


def test_finfo_disagreements_are_only_the_e5m2fnuz_epsilon():
    found = F.finfo_disagreements()
    assert all(k == "e5m2fnuz" and field == "eps" for k, field, _, _ in found)
    assert all(ours == FORMATS["e5m2fnuz"].epsilon for _, _, ours, _ in found)
    assert F.finfo_disagreements(["tf32"]) == []  # no torch dtype: skipped


def test_e5m2fnuz_finfo_eps_is_half_the_spacing_above_one():
    vals = _torch_values(FORMATS["e5m2fnuz"])
    finite = vals[torch.isfinite(vals)]
    above_one = finite[finite > 1].min().item()
    assert above_one - 1 == FORMATS["e5m2fnuz"].epsilon == 0.25
    assert torch.finfo(torch.float8_e5m2fnuz).eps in (0.125, 0.25)


# --- every bit pattern, decoded by torch -----------------------------------------------------

@pytest.mark.parametrize("key", [k for k in TORCH_FORMATS if FORMATS[k].bits <= 16])
def test_decode_matches_torch_for_every_pattern(key):
    fmt = FORMATS[key]
    theirs = _torch_values(fmt).tolist()
    for code, want in enumerate(theirs):
        got = fmt.decode(code)
        if math.isnan(want):
            assert math.isnan(got), (key, hex(code))
        else:
            assert got == want, (key, hex(code), got, want)
            # Signed zeros agree too (the FNUZ formats have none).
            assert math.copysign(1, got) == math.copysign(1, want), (key, hex(code))


@pytest.mark.parametrize("key", [k for k in FORMATS if FORMATS[k].bits <= 16])
def test_extremes_are_the_extremes_of_the_enumerated_values(key):
    fmt = FORMATS[key]
    vals = fmt.finite_values()
    positive = [v for v in vals if v > 0]
    assert max(vals) == fmt.max_normal and min(vals) == -fmt.max_normal
    assert min(positive) == fmt.min_subnormal
    assert max(v for v in positive if v < fmt.min_normal) == fmt.max_subnormal
    assert min(v for v in positive if v > 1) - 1 == fmt.epsilon


def test_fp32_patterns_sampled_against_struct():
    import struct
    fp32 = FORMATS["fp32"]
    for code in (0, 1, 0x007FFFFF, 0x00800000, 0x3F800000, 0x3F800001, 0x7F7FFFFF, 0x7F800000,
                 0x7FC00000, 0x80000001, 0xBF800000, 0xFF800000):
        want = struct.unpack("<f", struct.pack("<I", code))[0]
        got = fp32.decode(code)
        assert got == want or (math.isnan(got) and math.isnan(want)), hex(code)
    with pytest.raises(ValueError, match="too many"):
        fp32.finite_values()


# --- definitions and rendering ---------------------------------------------------------------

def test_fp8_formats_and_conventions():
    assert FP8_FORMATS == ("e5m2", "e4m3fn", "e5m2fnuz", "e4m3fnuz")
    assert {FORMATS[k].specials for k in FP8_FORMATS} == {"ieee", "fn", "fnuz"}
    # FNUZ biases are one more than IEEE's 2^(e-1) - 1.
    for key in ("e4m3fnuz", "e5m2fnuz"):
        f = FORMATS[key]
        assert f.bias == 2 ** (f.exponent_bits - 1)


def test_bad_definitions_and_codes_are_refused():
    with pytest.raises(ValueError, match="specials"):
        FloatFormat("x", 4, 3, 7, "ocp", "k")
    with pytest.raises(ValueError, match="at least"):
        FloatFormat("x", 1, 3, 0, "ieee", "k")
    with pytest.raises(ValueError, match="code must be"):
        FORMATS["e4m3fn"].decode(256)
    with pytest.raises(ValueError, match="power of two"):
        F.fmt_power_of_two(3.0)


def test_table_has_one_row_per_format_and_computed_cells():
    md = F.formats_table_markdown()
    rows = [ln for ln in md.splitlines() if ln.startswith("|")][2:]
    assert len(rows) == len(FORMATS)
    e4m3 = next(r for r in rows if r.startswith("| FP8 E4M3 "))
    assert "| 448 |" in e4m3 and "{math}`2^{-9}`" in e4m3 and "{math}`2^{-3}`" in e4m3
    fp32 = next(r for r in rows if r.startswith("| FP32 "))
    assert r"{math}`3.40 \times 10^{38}`" in fp32
    assert "{cite" not in F.formats_table_markdown(cite=False)
    assert F.fmt_power_of_two(2**-149) == "{math}`2^{-149}`"
    assert F.fmt_power_of_two(2**-7, math_role=False) == "2⁻⁷"
    assert F.fmt_power_of_two(2.0**10, math_role=False) == "2¹⁰"


def test_every_format_cites_a_bib_entry():
    text = "".join(p.read_text(encoding="utf-8") for p in BIB_DIR.glob("*.bib"))
    keys = set(re.findall(r"^@\w+\{([^,\s]+),", text, re.MULTILINE))
    assert {f.source for f in FORMATS.values()} <= keys
