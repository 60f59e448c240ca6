"""ZeRO's per-GPU model state against the ZeRO paper's published numbers (Rajbhandari et al., SC20).

Figure 1 and Section 5: Ψ = 7.5B, N_d = 64, K = 12 -> 120, 31.4, 16.6 and 1.9 GB per GPU.
Table 1: three models (7.5B, 128B, 1T) at N_d = 1 ... 1024 under P_os, P_os+g, P_os+g+p.
Table 2 (left): the largest model 64-way DP fits on 32 GB V100s, times the MP degree.
GB here is 10^9 bytes, as in the paper.
"""

from __future__ import annotations

from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal

import pytest

from infralens.memory import zero, zero_model_state_bytes
from infralens.memory.zero import STAGES, ZeroLines, zero_lines

GB = 10**9
STAGE_OF = {"os": 1, "os+g": 2, "os+g+p": 3}

# Table 1 as printed: model -> stage -> values at N_d = 1, 4, 16, 64, 256, 1024 (GB).
DP = (1, 4, 16, 64, 256, 1024)
TABLE1 = {
    7_500_000_000: {"os": ("120", "52.5", "35.6", "31.4", "30.4", "30.1"),
                    "os+g": ("120", "41.3", "21.6", "16.6", "15.4", "15.1"),
                    "os+g+p": ("120", "30", "7.5", "1.88", "0.47", "0.12")},
    128_000_000_000: {"os": ("2048", "896", "608", "536", "518", "513"),
                      "os+g": ("2048", "704", "368", "284", "263", "257"),
                      "os+g+p": ("2048", "512", "128", "32", "8", "2")},
    1_000_000_000_000: {"os": ("16000", "7000", "4750", "4187", "4046", "4011"),
                        "os+g": ("16000", "5500", "2875", "2218", "2054", "2013"),
                        "os+g+p": ("16000", "4000", "1000", "250", "62.5", "15.6")},
}
# How the paper rounds each model's column: the 7.5B values are rounded half up; the 128B and 1T
# values are truncated (4187.5 is printed 4187, 2218.75 is printed 2218).
ROUNDING = {7_500_000_000: ROUND_HALF_UP, 128_000_000_000: ROUND_FLOOR, 1_000_000_000_000: ROUND_FLOOR}


def as_printed(value_gb: float, text: str, rounding: str) -> str:
    """``value_gb`` rounded the paper's way, to as many decimals as ``text`` shows."""
    decimals = len(text.partition(".")[2])
    q = Decimal(value_gb).quantize(Decimal(1).scaleb(-decimals), rounding=rounding)
    return f"{q:.{decimals}f}"


def test_figure_1():
    psi, nd = 7_500_000_000, 64
    got = [zero_model_state_bytes(psi, nd, s, k=12) / GB for s in ("ddp", 1, 2, 3)]
    assert got == [120.0, 31.40625, 16.640625, 1.875]  # exact: 7.5e9 / 64 is a whole number
    assert [f"{g:.1f}" for g in got] == ["120.0", "31.4", "16.6", "1.9"]  # the figure's numbers


@pytest.mark.parametrize("psi", sorted(TABLE1))
def test_table_1(psi):
    for stage, row in TABLE1[psi].items():
        for nd, text in zip(DP, row, strict=True):
            value = zero_model_state_bytes(psi, nd, STAGE_OF[stage]) / GB
            assert as_printed(value, text, ROUNDING[psi]) == text, (psi, stage, nd, value)


def test_table_1_rounding_is_not_one_rule():
    """The same 3-significant-figure rounding does not reproduce every column: checked, not assumed."""
    one_t_os_64 = zero_model_state_bytes(10**12, 64, 1) / GB
    assert one_t_os_64 == 4187.5
    assert as_printed(one_t_os_64, "4187", ROUND_HALF_UP) == "4188"  # the paper prints 4187
    seven_os_256 = zero_model_state_bytes(7_500_000_000, 256, 1) / GB
    assert as_printed(seven_os_256, "30.4", ROUND_FLOOR) == "30.3"  # the paper prints 30.4
    # Figure 1 and Table 1 print the same number, 1.875 GB, as 1.9 and 1.88.
    assert zero_model_state_bytes(7_500_000_000, 64, 3) == 1_875_000_000


def largest_model(capacity: int, nd: int, stage) -> int:
    """The largest Ψ whose per-GPU model state fits ``capacity`` bytes (bisection on the API)."""
    lo, hi = 1, 10**15
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if zero_model_state_bytes(mid, nd, stage) <= capacity:
            lo = mid
        else:
            hi = mid - 1
    return lo


def test_table_2_theoretical_model_size():
    """64-way DP on 32 GB V100s: 2B, 7.6B, 14.4B and 128B; with MP = m, m times as large."""
    v100 = 32 * GB
    mp1 = {stage: largest_model(v100, 64, stage) / 1e9 for stage in STAGES}
    assert [round(mp1[s], 1) for s in STAGES] == [2.0, 7.6, 14.4, 128.0]
    # The paper's MP rows (128 ... 1024 GPUs) multiply the rounded MP = 1 values.
    printed = {2: (4, 15.2, 28.8, 256), 4: (8, 30.4, 57.6, 512), 8: (16, 60.8, 115.2, 1000),
               16: (32, 121.6, 230.4, 2000)}
    for m, row in printed.items():
        for stage, paper in zip(STAGES, row, strict=True):
            if stage == 3 and m >= 8:  # printed as 1T and 2T
                assert m * mp1[stage] == pytest.approx(paper, rel=0.03)
            else:
                assert round(m * round(mp1[stage], 1), 1) == paper
    assert m * mp1[1] == pytest.approx(122.27, abs=0.01)  # the exact value the paper rounds from


def test_section_5_reductions():
    """4x, 8x and N_d times less model state as N_d grows (Section 5.4)."""
    psi, nd = 10**12, 10**6
    ddp = zero_model_state_bytes(psi, nd, "ddp")
    assert ddp / zero_model_state_bytes(psi, nd, 1) == pytest.approx(4, rel=1e-4)
    assert ddp / zero_model_state_bytes(psi, nd, 2) == pytest.approx(8, rel=1e-4)
    assert ddp / zero_model_state_bytes(psi, nd, 3) == pytest.approx(nd, rel=1e-4)


def test_lines_and_padding():
    lines = zero_lines(10, 4, 3)  # ceil(10 / 4) = 3 elements per GPU
    assert lines == ZeroLines(2 * 3, 2 * 3, 12 * 3) and lines.total == 48
    assert zero_lines(10, 4, 1) == ZeroLines(20, 20, 36)
    assert zero_model_state_bytes(10, 1, 3) == zero_model_state_bytes(10, 1, "ddp") == 160
    assert zero_model_state_bytes(100, 4, 1, k=0) == 400  # SGD: nothing to partition


@pytest.mark.parametrize("kwargs, match", [
    ({"num_params": -1, "dp": 4, "stage": 1}, "num_params"),
    ({"num_params": 0, "dp": 4, "stage": 1}, "num_params"),
    ({"num_params": 10, "dp": 0, "stage": 1}, "dp"),
    ({"num_params": 10, "dp": 4, "stage": 4}, "stage"),
    ({"num_params": 10, "dp": 4, "stage": "zero3"}, "stage"),
    ({"num_params": 10, "dp": 4, "stage": True}, "stage"),
    ({"num_params": 10, "dp": 4, "stage": 1, "k": -1}, "k must"),
    ({"num_params": 1.5, "dp": 4, "stage": 1}, "num_params"),
])
def test_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        zero_model_state_bytes(**kwargs)
    assert "\n" not in str(err.value)


def test_the_modules_largest_model_reproduces_table_2():
    # zero.largest_model (doubling, then bisection) against this file's own bisection over 1 ... 10^15
    v100 = 32 * GB
    for stage in STAGES:
        assert zero.largest_model(v100, 64, stage) == largest_model(v100, 64, stage), stage
    assert round(zero.largest_model(v100, 64, 3) / 1e9, 1) == 128.0
    assert zero.largest_model(16, 1, "ddp") == 1 and zero.largest_model(31, 1, "ddp") == 1
    assert zero.largest_model(32, 1, "ddp") == 2  # 16 bytes per parameter without partitioning
    with pytest.raises(ValueError, match="capacity must be a positive integer"):
        zero.largest_model(0, 64, 1)


@pytest.mark.parametrize("psi", sorted(TABLE1))
def test_the_modules_as_printed_reproduces_table_1(psi):
    for stage, row in TABLE1[psi].items():
        for nd, text in zip(DP, row, strict=True):
            value = zero_model_state_bytes(psi, nd, STAGE_OF[stage]) / GB
            assert zero.as_printed(value, text, ROUNDING[psi]) == text


def test_as_printed_keeps_the_printed_decimals():
    assert zero.as_printed(31.40625, "31.4", ROUND_HALF_UP) == "31.4"
    assert zero.as_printed(1.875, "1.88", ROUND_HALF_UP) == "1.88"
    assert zero.as_printed(1.875, "2", ROUND_HALF_UP) == "2"
    assert zero.as_printed(4187.5, "4187", ROUND_FLOOR) == "4187"
    assert zero.as_printed(120.0, "120.00", ROUND_HALF_UP) == "120.00"


def test_check_stage():
    assert [zero.check_stage(s) for s in STAGES] == list(STAGES)
    for bad in (0, 4, "1", "zero1", True, None):
        with pytest.raises(ValueError, match="stage must be one of 'ddp', 1, 2, 3"):
            zero.check_stage(bad)


def test_fp32_weights_and_gradients_without_a_master_copy():
    # 4 + 4 + 8 bytes per parameter for fp32 AdamW; ZeRO-2 keeps the weights whole.
    lines = zero_lines(1000, 4, 2, k=8, weight_bytes=4, grad_bytes=4)
    assert lines == ZeroLines(4 * 1000, 4 * 250, 8 * 250) and lines.total == 7000


def test_largest_model_is_zero_when_not_one_parameter_fits():
    # One parameter of mixed-precision Adam state is 2 + 2 + 12 = 16 bytes on one GPU.
    assert zero.largest_model(15, 1, "ddp") == 0
    assert zero.largest_model(16, 1, "ddp") == 1
