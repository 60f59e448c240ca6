"""Derived quantities (peak rates, ridge points, implied clocks, sweeps) recomputed by hand
from the Spec values they are derived from, and checked against independent relations."""

from __future__ import annotations

import math

import pytest

from infralens import hardware as hw
from infralens.hardware import derived
from infralens.hardware.specs import DTYPES, GPUS

from .bib import HARDWARE_BIB, bib_keys


def close(a: float, b: float, rel: float = 1e-3) -> bool:
    return math.isclose(a, b, rel_tol=rel)


def test_hardware_bib_has_no_unused_entries():
    # hardware.bib holds the sources of the GPU constants, of facts and of the number formats.
    from infralens.numerics.formats import FORMATS

    cited = (hw.citation_keys(hw.ALL_GPUS.values()) | {s.source for s in hw.FACTS.values()}
             | {f.source for f in FORMATS.values()}
             | {"llvm2025apfloat"})  # the FNUZ biases, cited in the reference page's text
    assert set(bib_keys(HARDWARE_BIB)) <= cited
    assert hw.citation_keys() <= set(bib_keys(HARDWARE_BIB))


def test_a100_datasheet_rate_equals_sms_times_per_sm_rate_times_boost_clock():
    # Four numbers from two documents (datasheet rate; whitepaper SMs, per-SM rate, clock).
    a = hw.GPUS["a100"]
    product = a.sm_count.value * a.dense_bf16_flop_per_clock_per_sm.value * a.boost_clock_hz.value
    assert close(product, a.dense_bf16_flops.value)
    assert close(hw.implied_tensor_clock_hz(a), a.boost_clock_hz.value)


def test_hopper_sm_doubles_ampere_sm_per_clock():
    a, h = hw.GPUS["a100"], hw.GPUS["h100"]
    assert (h.dense_bf16_flop_per_clock_per_sm.value
            == 2 * a.dense_bf16_flop_per_clock_per_sm.value)
    # The implied H100 Tensor-Core clock must be a plausible clock (between A100's and the
    # 1980 MHz maximum SM clock the driver reports), not an artefact of a wrong SM count.
    assert a.boost_clock_hz.value < hw.implied_tensor_clock_hz(h) < 1980e6


def test_uncertain_specs_say_where_they_come_from():
    items = hw.uncertain_specs()
    assert items, "expected the unpublished H200/B200 values to be flagged"
    for g, name, s in items:
        assert len(s.note) > 40, (g.key, name)


@pytest.mark.parametrize("gpu", list(hw.GPUS.values()), ids=lambda g: g.key)
def test_ridge_point_is_flops_over_bandwidth(gpu):
    for dtype in hw.DTYPES:
        spec = getattr(gpu, f"dense_{dtype}_flops")
        if spec is None:
            with pytest.raises(ValueError):
                hw.ridge_point(gpu, dtype)
            continue
        assert hw.ridge_point(gpu, dtype) == spec.value / gpu.hbm_bandwidth_bytes_per_s.value
    with pytest.raises(ValueError):
        hw.ridge_point(gpu, "int4")


def test_ridge_point_scales_inversely_with_bandwidth():
    h100, h200 = hw.GPUS["h100"], hw.GPUS["h200"]
    ratio = hw.ridge_point(h100, "bf16") / hw.ridge_point(h200, "bf16")
    expected = h200.hbm_bandwidth_bytes_per_s.value / h100.hbm_bandwidth_bytes_per_s.value
    assert close(ratio, expected, 1e-12)


@pytest.mark.parametrize("gpu", list(hw.GPUS.values()), ids=lambda g: g.key)
def test_hbm_sweep_and_bytes_per_clock_identities(gpu):
    assert hw.hbm_sweep_seconds(gpu) * gpu.hbm_bandwidth_bytes_per_s.value == pytest.approx(
        gpu.hbm_capacity_bytes.value)
    bpc = hw.hbm_bytes_per_sm_per_clock(gpu)
    if bpc is not None:  # bytes/SM/clock = (FLOP/clock/SM) / ridge point
        assert bpc == pytest.approx(
            gpu.dense_bf16_flop_per_clock_per_sm.value / hw.ridge_point(gpu, "bf16"))


def test_h100_ridge_by_hand_from_the_datasheet():
    # 989.4 TFLOP/s dense BF16 over 3.35 TB/s of HBM3: about 295 FLOP per byte.
    h100 = GPUS["h100"]
    assert h100.dense_bf16_flops.value == 989.4e12 and h100.hbm_bandwidth_bytes_per_s.value == 3.35e12
    assert derived.ridge_point(h100, "bf16") == pytest.approx(989.4 / 3.35, rel=1e-12)
    assert round(derived.ridge_point(h100, "bf16")) == 295
    # FP8 doubles the rate, so the ridge moves twice as far right.
    assert derived.ridge_point(h100, "fp8") == pytest.approx(2 * derived.ridge_point(h100, "bf16"),
                                                            rel=1e-3)


@pytest.mark.parametrize("gpu", list(GPUS.values()), ids=lambda g: g.key)
def test_peak_flops_is_the_dense_spec_of_each_dtype(gpu):
    for dtype in DTYPES:
        spec = getattr(gpu, f"dense_{dtype}_flops")
        if spec is None:
            with pytest.raises(ValueError, match="no"):
                derived.peak_flops(gpu, dtype)
        else:
            assert derived.peak_flops(gpu, dtype) == float(spec.value)
    with pytest.raises(ValueError, match="dtype must be one of"):
        derived.peak_flops(gpu, "tf32")


def test_implied_clock_and_bytes_per_clock_by_hand():
    h100 = GPUS["h100"]
    clock = h100.dense_bf16_flops.value / (h100.sm_count.value * h100.dense_bf16_flop_per_clock_per_sm.value)
    assert derived.implied_tensor_clock_hz(h100) == pytest.approx(clock, rel=1e-15)
    assert 1.8e9 < clock < 1.85e9  # 989.4e12 / (132 x 4096) = 1.830 GHz
    per_sm = h100.hbm_bandwidth_bytes_per_s.value / h100.sm_count.value / clock
    assert derived.hbm_bytes_per_sm_per_clock(h100) == pytest.approx(per_sm, rel=1e-15)
    # Without a per-SM rate (the B200's is not published) there is no implied clock.
    assert GPUS["b200"].dense_bf16_flop_per_clock_per_sm is None
    assert derived.implied_tensor_clock_hz(GPUS["b200"]) is None
    assert derived.hbm_bytes_per_sm_per_clock(GPUS["b200"]) is None


def test_hbm_sweep_of_an_h100_is_about_27_ms():
    h100 = GPUS["h100"]
    assert derived.hbm_sweep_seconds(h100) == 80 * 2**30 / 3.35e12
    assert 0.0256 < derived.hbm_sweep_seconds(h100) < 0.0258


def test_citation_keys_and_uncertain_specs_of_a_subset():
    a100 = GPUS["a100"]
    assert derived.citation_keys([a100]) == {s.source for s in a100.specs().values()}
    assert derived.citation_keys([a100]) <= derived.citation_keys()
    assert derived.uncertain_specs([a100, GPUS["h100"]]) == []  # both fully published
    flagged = derived.uncertain_specs([GPUS["h200"]])
    assert flagged and all(g.key == "h200" and s.uncertain for g, _, s in flagged)
    assert {name for _, name, _ in flagged} == {n for n, s in GPUS["h200"].specs().items() if s.uncertain}


# --- FP32 and special-function rates on the CUDA cores ---------------------------------------------

def test_a100_fp32_peak_is_the_datasheets_19_5_tflops():
    # A100 whitepaper: 108 SMs x 64 FP32 lanes x 2 FLOP (FMA) x 1.41 GHz = 19.49 TFLOP/s, printed
    # as 19.5 TFLOP/s in the A100 datasheet's FP32 row.
    a100 = GPUS["a100"]
    assert derived.fp32_clock_hz(a100) == 1.41e9 == a100.boost_clock_hz.value
    assert derived.fp32_flops(a100) == 108 * 64 * 2 * 1.41e9
    assert round(derived.fp32_flops(a100) / 1e12, 1) == 19.5


def test_h100_sxm_fp32_peak_is_the_datasheets_67_tflops():
    # H100 SXM5: 132 SMs x 128 FP32 lanes x 2 x 1.98 GHz = 66.9 TFLOP/s; the datasheet prints 67.
    h100 = GPUS["h100"]
    assert h100.boost_clock_hz is None  # the clock comes from the facts, with its source
    assert derived.fp32_clock_hz(h100) == 1.98e9
    assert derived.fp32_flops(h100) == 132 * 128 * 2 * 1.98e9
    assert round(derived.fp32_flops(h100) / 1e12) == 67


def test_hopper_doubles_amperes_fp32_lanes_per_sm_per_clock():
    # The CUDA guide's throughput table: 64 (8.0) and 128 (9.0) FP32 FMA results per clock per SM.
    a100, h100 = GPUS["a100"], GPUS["h100"]
    per_sm_clock = {g.key: derived.fp32_flops(g, 1.0) / g.sm_count.value / 2 for g in (a100, h100)}
    assert per_sm_clock == {"a100": 64, "h100": 128}


def test_h100_special_functions_at_the_tensor_clock_are_flashattention3s_3_9_tera_per_second():
    # FlashAttention-3 (Shah et al. 2024): an H100 SXM5 has 989 TFLOPS of FP16 matmul but only
    # 3.9 TFLOPS of special functions (exp). 16 MUFU results per clock per SM (CUDA guide).
    h100 = GPUS["h100"]
    at_tensor_clock = derived.sfu_ops_per_s(h100, hw.implied_tensor_clock_hz(h100))
    assert round(at_tensor_clock / 1e12, 1) == 3.9
    assert round(hw.peak_flops(h100, "bf16") / 1e12) == 989
    assert derived.sfu_ops_per_s(h100) == 132 * 16 * 1.98e9  # default: the FP32 clock


@pytest.mark.parametrize("key, ratio", [("a100", 4), ("h100", 8)])
def test_fp32_flops_over_special_function_rate(key, ratio):
    # Per clock and SM: 2 x FP32 lanes FLOP against 16 MUFU results; the ratio holds at any clock.
    gpu = GPUS[key]
    for clock in (None, 1e9, 1.5e9):
        assert derived.fp32_flops(gpu, clock) / derived.sfu_ops_per_s(gpu, clock) == 2 * ratio


def test_a_clock_argument_scales_the_rates_linearly():
    h100 = GPUS["h100"]
    assert derived.fp32_flops(h100, 1e9) == 132 * 128 * 2 * 1e9
    assert derived.fp32_flops(h100, 2e9) == 2 * derived.fp32_flops(h100, 1e9)
    assert derived.sfu_ops_per_s(h100, 1e9) == 132 * 16 * 1e9


def test_rates_without_a_sourced_clock_or_pipe_width_are_refused():
    h200, b200 = GPUS["h200"], GPUS["b200"]
    # The H200 page prints no clock; the B200's per-SM FP32 width (CC 10.0) is not in the facts.
    with pytest.raises(ValueError, match="no sourced boost clock"):
        derived.fp32_clock_hz(h200)
    with pytest.raises(ValueError, match="no sourced boost clock"):
        derived.fp32_flops(h200)
    with pytest.raises(ValueError, match="no sourced boost clock"):
        derived.sfu_ops_per_s(h200)
    # With a clock given, the H200 (the H100's GH100, CC 9.0, 132 SMs) gets the H100's rate.
    assert derived.fp32_flops(h200, 1.98e9) == derived.fp32_flops(GPUS["h100"])
    with pytest.raises(ValueError, match="compute capability 10.0"):
        derived.fp32_flops(b200, 1.9e9)
    with pytest.raises(ValueError, match="special-function"):
        derived.sfu_ops_per_s(b200, 1.9e9)
