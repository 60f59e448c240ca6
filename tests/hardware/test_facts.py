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


