"""The reference page's tables and number formats: every number cited, one row per item."""

from __future__ import annotations

import re

from infralens import hardware as hw

from .bib import HARDWARE_BIB, bib_keys

_CITE = re.compile(r"\{cite:[pt]\}`([^`]+)`")


def test_formatters():
    assert hw.fmt_tbps(3.35e12) == "3.35 TB/s"
    assert hw.fmt_gbps(900e9) == "900 GB/s"
    assert hw.fmt_tflops(989.4e12) == "989.4 TFLOP/s"
    assert hw.fmt_bytes(80 * hw.GIB) == "80 GiB"
    assert hw.fmt_bytes(228 * hw.KIB) == "228 KiB"
    assert hw.fmt_spec(None) == "—"


def _rows(md: str) -> list[list[str]]:
    lines = [ln for ln in md.splitlines() if ln.startswith("|")]
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:]]


def _numbers_outside_roles(cell: str) -> list[str]:
    text = re.sub(r"\{[a-z:]+\}`[^`]*`", "", cell)
    text = re.sub(r"\b(?:HBM\w*|FP8)\b", "", text)  # memory type / dtype names contain digits
    return re.findall(r"\d[\d,.]*", text)


def test_reference_table_has_one_row_per_gpu_and_cites_every_number():
    md = hw.reference_table_markdown()
    rows = _rows(md.split("\n\n")[0])
    assert [r[0] for r in rows] == [g.name for g in hw.GPUS.values()]
    valid = set(bib_keys(HARDWARE_BIB))
    for row in rows:
        for cell in row[1:]:
            numbers = _numbers_outside_roles(cell)
            cites = _CITE.findall(cell)
            if cell in ("not published", "no FP8"):
                assert not numbers and not cites
                continue
            assert len(numbers) == 1 and len(cites) == 1, cell
            assert cites[0] in valid, cell


def test_reference_table_marks_each_uncertain_value_and_explains_it():
    md = hw.reference_table_markdown()
    table, _, notes = md.partition("\n\n")
    shown = {"sm_count", "hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s", "l2_bytes",
             "dense_bf16_flops", "dense_fp8_flops", "nvlink_bandwidth_bytes_per_s"}
    flagged = [(g, n) for g, n, _ in hw.uncertain_specs() if n in shown]
    assert table.count("†") == len(flagged)
    for g, n in flagged:
        assert f"**{g.name}, {n}**" in notes


def test_sm_limits_table_cites_the_cuda_guide_in_every_number_cell():
    rows = _rows(hw.sm_limits_table_markdown())
    assert [r[0] for r in rows] == [f"{a}.{b}" for a, b in hw.CC_LIMITS]
    for row in rows:
        for cell in row[2:]:
            assert _CITE.findall(cell) == ["nvidiacudaguide"], cell


def test_cite_false_renders_no_roles():
    assert "{cite" not in hw.reference_table_markdown(cite=False, notes=False)
    assert "{cite" not in hw.sm_limits_table_markdown(cite=False)


def test_derived_table_rows_match_functions():
    rows = _rows(hw.derived_table_markdown())
    for row, g in zip(rows, hw.GPUS.values(), strict=True):
        assert row[0] == g.name
        assert row[1].rstrip("†") == f"{hw.ridge_point(g, 'bf16'):,.0f}"


def test_notation_table_one_row_per_symbol():
    rows = _rows(hw.notation_table_markdown())
    assert len(rows) == len(hw.NOTATION)
    assert all(r[0].startswith("{math}`") for r in rows)



def test_fmt_tops_and_op_specs():
    assert hw.fmt_tops(1978.9e12) == "1,978.9 TOP/s"
    assert hw.fmt_spec(hw.GPUS["h100"].dense_int8_ops) == "1,978.9 TOP/s"


def test_precision_table_cites_every_rate_and_computes_the_ratio():
    h100 = hw.GPUS["h100"]
    rows = _rows(hw.precision_table_markdown(h100))
    assert [(r[0], r[1]) for r in rows] == [(p, u) for p, u, _ in hw.PRECISION_ROWS]
    valid = set(bib_keys(HARDWARE_BIB))
    for row, (_, _, field) in zip(rows, hw.PRECISION_ROWS, strict=True):
        spec = getattr(h100, field)
        assert _CITE.findall(row[2]) == [spec.source] and spec.source in valid
        assert len(_numbers_outside_roles(row[2].replace("TOP/s", ""))) == 1
        assert row[3] == f"{spec.value / h100.nontensor_fp32_flops.value:,.1f}"
    # A GPU without the printed rates gets only the rows it has.
    b200_rows = _rows(hw.precision_table_markdown(hw.GPUS["b200"]))
    assert [r[0] for r in b200_rows] == ["BF16", "FP16", "FP8"]
    assert all(r[3] == "—" for r in b200_rows)


def test_spec_table_marks_uncertain_values_and_can_drop_notes():
    spec = hw.Spec(4, "cycles", "k", "a note", uncertain=True)
    rows = _rows(hw.spec_table_markdown([("latency", spec)]))
    assert rows == [["latency", "4 cycles† {cite:p}`k`", "a note"]]
    rows = _rows(hw.spec_table_markdown([("latency", spec)], cite=False, notes=False))
    assert rows == [["latency", "4 cycles†"]]


def test_allocation_rules_table_one_column_per_compute_capability():
    from infralens.gpuarch.occupancy import RULES

    rows = _rows(hw.allocation_rules_table_markdown(RULES))
    assert [r[0] for r in rows] == [what for what, _ in hw.ALLOCATION_RULE_ROWS]
    by_row = {r[0]: r[1:] for r in rows}
    assert by_row["32-bit registers per thread, at most"] == [
        "255 registers {cite:p}`nvidiacudaguide`"] * len(RULES)
    assert by_row["Register allocation unit"][0].startswith("256 registers per warp")
    assert by_row["Shared memory reserved per block"][1].startswith("1 KiB")


def test_kernel_facts_table_reads_the_facts():
    rows = _rows(hw.kernel_facts_table_markdown())
    assert len(rows) == len(hw.KERNEL_FACT_ROWS)
    for row, (_, key) in zip(rows, hw.KERNEL_FACT_ROWS, strict=True):
        assert _CITE.findall(row[1]) == [hw.FACTS[key].source]
    tmem = rows[[k for _, k in hw.KERNEL_FACT_ROWS].index("blackwell_tmem_per_sm_bytes")]
    assert tmem[1].startswith("256 KiB")
