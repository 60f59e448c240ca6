"""The command line's tables: exact integers with separators next to binary and decimal units."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from infralens.memory.report import Breakdown, format_table, human_bytes, human_count


@pytest.mark.parametrize("n, text", [
    (0, "0 B"), (1023, "1023 B"), (1024, "1.00 KiB"), (1536, "1.50 KiB"), (2**20 - 1, "1024.00 KiB"),
    (2**30, "1.00 GiB"), (80 * 2**30, "80.00 GiB"), (3 * 2**40 // 2, "1.50 TiB"),
    (2**50, "1.00 PiB"), (2**60, "1024.00 PiB"),  # past the last unit the number grows
    (-2048, "-2.00 KiB"),
])
def test_human_bytes_in_binary_units(n, text):
    assert human_bytes(n) == text


@pytest.mark.parametrize("n, text", [
    (0, "0"), (999, "999"), (1000, "1.00 K"), (124_439_808, "124.44 M"),  # GPT-2 small
    (8_030_261_248, "8.03 B"), (46_702_792_704, "46.70 B"), (10**12, "1.00 T"), (-1_500_000, "-1.50 M"),
])
def test_human_count_in_decimal_units(n, text):
    assert human_count(n) == text


def test_table_layout():
    table = format_table("Memory", [("weights", 2 * 2**30), ("kv cache", 512), ("total", 2 * 2**30 + 512)])
    assert table.splitlines() == [
        "Memory",
        "  item              bytes",
        "  weights   2,147,483,648  2.00 GiB",
        "  kv cache            512  512 B",
        "  --------  -------------",
        "  total     2,147,484,160  2.00 GiB",
    ]


def test_table_with_a_custom_unit_and_short_names():
    table = format_table("Parameters", [("a", 124_439_808)], humanize=human_count, unit="params")
    assert table.splitlines() == ["Parameters", "  item       params", "  a     124,439,808  124.44 M"]


@dataclass(frozen=True)
class _Split(Breakdown):
    first: int
    second: int
    unit: str  # not a line

    LINES = (("first ({unit})", "first"), ("second", "second"))


def test_breakdown_rows_are_its_lines_then_their_sum():
    split = _Split(2, 3, "B")
    assert split.total == 5
    assert split.rows() == (("first (B)", 2), ("second", 3), ("total", 5))
    assert format_table("Split", split.rows()).splitlines()[-1].split()[:2] == ["total", "5"]
