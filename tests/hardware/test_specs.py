"""Consistency checks for the sourced constants of infralens.hardware.specs.

These tests do not restate the constants (that would be a tautology). They check relations
that must hold by definition or across independent sources: citations resolve, warps x warp
size = threads, the H200 and H100 share the GH100 compute configuration, dense x 2 = sparse.
(The derived quantities, the rendered tables and the notation have their own test modules.)
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

from infralens import hardware as hw

from .bib import HARDWARE_BIB, all_bib_keys, bib_keys


def close(a: float, b: float, rel: float = 1e-3) -> bool:
    return math.isclose(a, b, rel_tol=rel)


# --- citations ---------------------------------------------------------------------------------

def test_every_spec_source_is_in_hardware_bib():
    keys = set(bib_keys(HARDWARE_BIB))
    missing = {(g.key, name, s.source) for g in hw.GPUS.values()
               for name, s in g.specs().items() if s.source not in keys}
    assert not missing, f"sources missing from {HARDWARE_BIB.name}: {sorted(missing)}"


def test_every_variant_source_is_a_bib_entry():
    # The GB200 cites the GB200 NVL72 page, which Chapter 1's bibliography already holds.
    keys = set(all_bib_keys())
    missing = {(g.key, name, s.source) for g in hw.VARIANTS.values()
               for name, s in g.specs().items() if s.source not in keys}
    assert not missing, sorted(missing)


def test_bib_keys_are_unique_across_all_bib_files():
    keys = all_bib_keys()
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    assert not dupes, f"keys defined more than once in conf/bib: {dupes}"


def test_hardware_bib_entries_have_title_year_url():
    text = HARDWARE_BIB.read_text(encoding="utf-8")
    chunks = re.split(r"(?m)^@", text)[1:]
    assert len(chunks) == len(bib_keys(HARDWARE_BIB))
    for chunk in chunks:
        key = chunk.split("{", 1)[1].split(",", 1)[0]
        for field in ("title", "year"):
            assert re.search(rf"^\s*{field}\s*=", chunk, re.MULTILINE), (key, field)
        if not key.startswith("infralens"):  # our own device query has no URL
            assert re.search(r"^\s*url\s*=", chunk, re.MULTILINE), (key, "url")


# --- per-SM limits (CUDA Programming Guide) -------------------------------------------------

@pytest.mark.parametrize("cc", list(hw.CC_LIMITS))
def test_warps_times_warp_size_is_threads(cc):
    lim = hw.CC_LIMITS[cc]
    assert lim.max_warps_per_sm.value * lim.warp_size.value == lim.max_threads_per_sm.value


@pytest.mark.parametrize("cc", list(hw.CC_LIMITS))
def test_block_smem_is_sm_smem_minus_reserved_kib(cc):
    # The guide reserves 1 KB of shared memory per block for system use; the per-block
    # maximum is the per-SM maximum less that reservation on every data-center part.
    lim = hw.CC_LIMITS[cc]
    assert lim.smem_per_sm_bytes.value - lim.smem_per_block_max_bytes.value == hw.KIB


@pytest.mark.parametrize("cc", list(hw.CC_LIMITS))
def test_register_file_fills_at_full_occupancy_with_32_registers(cc):
    lim = hw.CC_LIMITS[cc]
    # 64 K registers of 4 bytes = the 256 KB register file the whitepapers print per SM.
    assert lim.registers_per_sm.value * 4 == 256 * hw.KIB
    assert lim.registers_per_sm.value // lim.max_threads_per_sm.value == 32


def test_every_gpu_has_limits_for_its_compute_capability():
    for g in hw.GPUS.values():
        assert g.compute_capability in hw.CC_LIMITS
        assert g.sm_limits.max_threads_per_sm is hw.CC_LIMITS[g.compute_capability].max_threads_per_sm


# --- cross-source relations ----------------------------------------------------------------------

def test_h200_shares_the_h100_compute_configuration():
    h100, h200 = hw.GPUS["h100"], hw.GPUS["h200"]
    assert h100.compute_capability == h200.compute_capability
    assert h100.sm_count.value == h200.sm_count.value
    # The sparse rates come from two different NVIDIA documents: they must agree.
    assert h100.sparse_bf16_flops.source != h200.sparse_bf16_flops.source
    assert h100.sparse_bf16_flops.value == h200.sparse_bf16_flops.value
    assert h100.sparse_fp8_flops.value == h200.sparse_fp8_flops.value
    for f in ("dense_bf16_flops", "dense_fp16_flops", "dense_fp8_flops",
              "dense_bf16_flop_per_clock_per_sm"):
        assert getattr(h100, f).value == getattr(h200, f).value, f
    # ...and differ in memory.
    assert h200.hbm_capacity_bytes.value > h100.hbm_capacity_bytes.value
    assert h200.hbm_bandwidth_bytes_per_s.value > h100.hbm_bandwidth_bytes_per_s.value


@pytest.mark.parametrize("gpu", list(hw.ALL_GPUS.values()), ids=lambda g: g.key)
def test_sparse_rate_is_twice_dense(gpu):
    # Datasheets round to whole TFLOP/s; the whitepaper gives one decimal: 0.1 % tolerance.
    assert close(2 * gpu.dense_bf16_flops.value, gpu.sparse_bf16_flops.value)
    if gpu.dense_fp8_flops is not None:
        assert close(2 * gpu.dense_fp8_flops.value, gpu.sparse_fp8_flops.value)
    else:
        assert gpu.sparse_fp8_flops is None


@pytest.mark.parametrize("gpu", list(hw.ALL_GPUS.values()), ids=lambda g: g.key)
def test_fp16_equals_bf16_and_fp8_doubles_it(gpu):
    assert gpu.dense_fp16_flops.value == gpu.dense_bf16_flops.value
    if gpu.dense_fp8_flops is not None:
        assert close(gpu.dense_fp8_flops.value, 2 * gpu.dense_bf16_flops.value)


# --- units ---------------------------------------------------------------------------------------

_UNITS = {"B", "B/s", "FLOP/s", "OP/s", "Hz", "SMs", "FLOP/clock/SM", "32-bit registers",
          "threads", "warps", "blocks"}


@pytest.mark.parametrize("gpu", list(hw.ALL_GPUS.values()), ids=lambda g: g.key)
def test_units_are_known_and_values_positive(gpu):
    for name, s in gpu.specs().items():
        assert s.unit in _UNITS, (name, s.unit)
        assert s.value > 0, name
        if name.endswith("_bytes"):
            assert s.unit == "B", name
        if name.endswith("_bytes_per_s"):
            assert s.unit == "B/s", name
        if name.endswith("_flops"):
            assert s.unit == "FLOP/s", name
        if name.endswith("_ops") and not name.endswith("_flops"):
            assert s.unit == "OP/s", name


@pytest.mark.parametrize("gpu", list(hw.ALL_GPUS.values()), ids=lambda g: g.key)
def test_capacities_are_binary_and_rates_decimal(gpu):
    assert gpu.hbm_capacity_bytes.value % hw.GIB == 0
    if gpu.l2_bytes is not None:
        # Whole KiB, not whole MiB: the B200's device query reports 126.5 MiB.
        assert gpu.l2_bytes.value % hw.KIB == 0
    assert gpu.sm_limits.smem_per_sm_bytes.value % hw.KIB == 0
    # Bandwidths are printed in decimal GB/s: whole multiples of 10**9 B/s.
    for s in (gpu.hbm_bandwidth_bytes_per_s, gpu.nvlink_bandwidth_bytes_per_s):
        assert round(s.value) % hw.GB == 0


def test_matches_only_the_sxm_product_names():
    assert hw.GPUS["h100"].matches("NVIDIA H100 80GB HBM3")
    assert hw.GPUS["h200"].matches("nvidia  h200")
    assert not hw.GPUS["h100"].matches("NVIDIA H100 PCIe")
    assert not hw.GPUS["h200"].matches("NVIDIA H200 NVL")
    assert not hw.GPUS["a100"].matches("NVIDIA A100-SXM4-40GB")
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "NVIDIA B200"):
        assert sum(g.matches(name) for g in hw.GPUS.values()) == 1, name


def test_all_gpus_have_distinct_keys_and_device_names():
    assert list(hw.ALL_GPUS) == [*hw.GPUS, *hw.VARIANTS]
    assert [g.key for g in hw.ALL_GPUS.values()] == list(hw.ALL_GPUS)
    assert list(hw.VARIANTS) == ["h100_pcie", "h100_nvl", "gb200"]
    names = [n.casefold() for g in hw.ALL_GPUS.values() for n in g.device_names]
    assert len(names) == len(set(names))
    for name in ("NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GB200"):
        found = [g.key for g in hw.ALL_GPUS.values() if g.matches(name)]
        assert len(found) == 1 and found[0] in hw.VARIANTS, name


def test_specs_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.GPUS["h100"].sm_count.value = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        hw.GPUS["x"] = hw.GPUS["h100"]  # type: ignore[index]


def test_l2_sizes_from_device_queries_are_flagged_like_the_h200s():
    # NVIDIA prints no L2 size for the H200 or the B200; both come from a device query.
    for key in ("h200", "b200"):
        l2 = hw.GPUS[key].l2_bytes
        assert l2 is not None and l2.uncertain, key
        assert "Not published" in l2.note or "Not printed" in l2.note, key
    assert hw.GPUS["b200"].l2_bytes.source == hw.GPUS["b200"].sm_count.source
    assert not hw.GPUS["h100"].l2_bytes.uncertain


_DRIVER_TOTAL = re.compile(r"driver reports ([\d,]+) B")


@pytest.mark.parametrize("key", ["h100", "h200"])
def test_driver_total_lies_between_decimal_and_binary_capacity(key):
    # The hardware reference says the binary reading is a convention, not settled by the
    # driver: the measured total is above the decimal label and below the stored GiB value.
    spec = hw.GPUS[key].hbm_capacity_bytes
    match = _DRIVER_TOTAL.search(spec.note)
    assert match, spec.note
    total = int(match.group(1).replace(",", ""))
    label = spec.value // hw.GIB
    assert label * hw.GB < total < spec.value


# --- the other precisions ---------------------------------------------------------------------


def test_hopper_precision_ladder():
    # The whitepaper's Table 3, for both Hopper columns: TF32 is half of BF16, INT8 equals FP8,
    # the FP64 Tensor Cores double the FP64 units, the FP32 units double the FP64 units (128
    # against 64 per SM), at the same clock.
    for key in ("h100", "h100_pcie", "h100_nvl"):
        g = hw.ALL_GPUS[key]
        assert close(2 * g.dense_tf32_flops.value, g.dense_bf16_flops.value), key
        assert g.dense_int8_ops.value == g.dense_fp8_flops.value, key
        assert close(g.dense_fp64_flops.value, 2 * g.nontensor_fp64_flops.value, 2e-3), key
        assert close(g.nontensor_fp32_flops.value, 2 * g.nontensor_fp64_flops.value, 2e-3), key


def test_hopper_fp64_tensor_and_fp32_run_at_the_non_tensor_clock():
    # 132 SMs x 128 FP32 units x 2 FLOP x 1.98 GHz = 66.9 TFLOP/s, the rate Table 3 prints for
    # FP32 and for FP64 on the Tensor Cores; the H100 PCIe's at its 1,755 MHz.
    for key, rate in (("h100", 66.9e12), ("h100_pcie", 51.2e12)):
        g = hw.ALL_GPUS[key]
        assert round(hw.fp32_flops(g) / 1e11) == round(rate / 1e11), key
        assert close(g.nontensor_fp32_flops.value, rate, 1e-12), key
        assert g.dense_fp64_flops.value == g.nontensor_fp32_flops.value, key


def test_h100_pcie_is_the_sxm5_sm_at_its_own_clocks():
    pcie, sxm = hw.VARIANTS["h100_pcie"], hw.GPUS["h100"]
    assert pcie.compute_capability == sxm.compute_capability
    assert pcie.dense_bf16_flop_per_clock_per_sm.value == sxm.dense_bf16_flop_per_clock_per_sm.value
    # 756 TFLOP/s over 114 SMs x 4096 FLOP per clock: the 1,620 MHz Tensor-Core boost clock.
    assert round(hw.implied_tensor_clock_hz(pcie) / 1e6) == 1619
    assert pcie.boost_clock_hz.value == 1.755e9
    assert pcie.sm_count.value < sxm.sm_count.value
    assert pcie.hbm_bandwidth_bytes_per_s.value < sxm.hbm_bandwidth_bytes_per_s.value


def test_nvl_dense_rates_are_half_the_printed_sparse_ones():
    nvl = hw.VARIANTS["h100_nvl"]
    assert nvl.dense_bf16_flops.value * 2 == nvl.sparse_bf16_flops.value == 1671e12
    assert nvl.dense_fp8_flops.value * 2 == nvl.sparse_fp8_flops.value == 3341e12
    assert nvl.sm_count is None and nvl.l2_bytes is None  # not in the datasheet
    assert "sparsity" in nvl.dense_tf32_flops.note


def test_gb200_per_gpu_is_half_a_superchip_and_one_72nd_of_an_nvl72():
    gb = hw.VARIANTS["gb200"]
    assert gb.compute_capability == hw.GPUS["b200"].compute_capability
    # NVL72: 72 GPUs x 8 TB/s = 576 TB/s; 72 x 1.8 TB/s is the printed 130 TB/s, rounded.
    assert hw.fact("nvl72_gpus") * gb.hbm_bandwidth_bytes_per_s.value == 576e12
    total = hw.fact("nvl72_gpus") * gb.nvlink_bandwidth_bytes_per_s.value
    assert abs(total - hw.fact("nvl72_nvlink_bytes_per_s")) / total < 0.01
    # Its GPUs run faster than the HGX B200's; the capacity NVIDIA revised is flagged.
    assert gb.dense_bf16_flops.value > hw.GPUS["b200"].dense_bf16_flops.value
    assert gb.hbm_capacity_bytes.uncertain and "372 GB" in gb.hbm_capacity_bytes.note


# --- derived quantities --------------------------------------------------------------------------


# --- formatting ----------------------------------------------------------------------------------


# --- rendered tables -----------------------------------------------------------------------------


# --- notation ------------------------------------------------------------------------------------
