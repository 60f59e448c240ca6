"""Architecture facts cite real bib keys and agree with the specs and the occupancy rules."""

from __future__ import annotations

from infralens import hardware as hw
from infralens.gpuarch.occupancy import RULES
from infralens.hardware.facts import FACTS, fact, uncertain_facts

from .bib import all_bib_keys


def test_every_fact_and_rule_cites_an_existing_bib_entry():
    keys = set(all_bib_keys())
    sources = {s.source for s in FACTS.values()}
    for rules in RULES.values():
        sources |= {getattr(rules, f).source for f in rules.__dataclass_fields__
                    if f != "compute_capability"}
    assert sources <= keys, sources - keys


def test_uncertain_facts_explain_themselves():
    assert uncertain_facts()
    for spec in uncertain_facts().values():
        assert len(spec.note) > 40


def test_facts_agree_with_the_hardware_module():
    h100, b200 = hw.GPUS["h100"], hw.GPUS["b200"]
    # 18 links x 25 GB/s each way x 2 directions = 900 GB/s.
    assert h100.nvlink_bandwidth_bytes_per_s.value % fact("h100_nvlink_links") == 0
    # NVL72: 72 GPUs x 1.8 TB/s is the printed 130 TB/s, rounded.
    total = fact("nvl72_gpus") * b200.nvlink_bandwidth_bytes_per_s.value
    assert abs(total - fact("nvl72_nvlink_bytes_per_s")) / total < 0.01
    # The shared-memory carve-out never exceeds the unified L1/shared SRAM.
    assert h100.sm_limits.smem_per_sm_bytes.value < fact("h100_l1_smem_per_sm_bytes")
    assert hw.GPUS["a100"].sm_limits.smem_per_sm_bytes.value < fact("a100_l1_smem_per_sm_bytes")
    # Four sub-partitions in the whitepaper and in the occupancy calculator.
    assert fact("sm_sub_partitions") == RULES[(9, 0)].sub_partitions.value
    # MI300X: 8 XCDs x 38 CUs.
    assert fact("mi300x_cus") % fact("mi300x_xcds") == 0
    assert fact("cache_line_bytes") == 4 * fact("sector_bytes")




def test_mi300x_link_figure_counts_both_directions():
    # x16 lanes at 32 Gb/s: 64 GB/s each way, so the sheet's 128 GB/s per link is both directions,
    # and seven links make the white paper's 896 GB/s of peak aggregate bandwidth.
    each_way = fact("mi300x_if_link_lanes") * fact("mi300x_if_lane_bits_per_s") / 8
    assert 2 * each_way == fact("mi300x_if_link_bytes_per_s")
    assert fact("mi300x_if_links") * fact("mi300x_if_link_bytes_per_s") == 896 * hw.GB


def test_wgmma_reads_32_bytes_of_k_for_every_input_type():
    for key, width in (("wgmma_k_tf32", 4), ("wgmma_k_f16", 2), ("wgmma_k_fp8", 1), ("wgmma_k_int8", 1)):
        assert fact(key) * width == 32, key


def test_cc90_instruction_rates_agree_with_the_printed_peaks():
    h100 = hw.GPUS["h100"]
    # FP64 (non-Tensor): 64 results per clock per SM at the 1.98 GHz boost clock is the
    # datasheet's 34 TFLOP/s, an FMA counting two FLOP.
    fp64 = h100.sm_count.value * fact("cc90_fp64_results_per_clock_per_sm") * 2 * hw.fp32_clock_hz(h100)
    assert abs(fp64 / 34e12 - 1) < 0.02
    assert fact("cc90_fp16_results_per_clock_per_sm") == 2 * fact("h100_fp32_lanes_per_sm")


def test_tensor_memory_is_128_lanes_by_512_columns_of_32_bit_cells():
    assert fact("blackwell_tmem_per_sm_bytes") == 128 * 512 * 4
