"""Plain-text tables for the command line: exact integers next to human-readable units.

Exact counts are what you check against a checkpoint; human units are what you compare with
a GPU's capacity. Every table shows both, so neither has to be recomputed by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def human_bytes(n: int) -> str:
    """Bytes in binary units, as GPU memory is reported: ``human_bytes(2**30) == "1.00 GiB"``."""
    value, unit = float(n), _BINARY_UNITS[0]
    for unit in _BINARY_UNITS:
        if abs(value) < 1024 or unit == _BINARY_UNITS[-1]:
            break
        value /= 1024
    return f"{n} B" if unit == "B" else f"{value:.2f} {unit}"


def human_count(n: int) -> str:
    """A parameter count in decimal units, as models are named: ``"8.03 B"``, ``"124.44 M"``."""
    for scale, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {suffix}"
    return str(n)


def format_table(
    title: str,
    rows: Sequence[tuple[str, int]],
    humanize: Callable[[int], str] = human_bytes,
    unit: str = "bytes",
) -> str:
    """An aligned table: a title line, a header, then ``name  exact  human`` per row.

    Numbers are right-aligned with thousands separators; a row named ``"total"`` is set off
    by a rule above it.
    """
    name_width = max(len("item"), *(len(name) for name, _ in rows))
    exact = [f"{value:,}" for _, value in rows]
    exact_width = max(len(unit), *(len(text) for text in exact))
    lines = [title, f"  {'item':<{name_width}}  {unit:>{exact_width}}"]
    for (name, value), text in zip(rows, exact, strict=True):
        if name == "total":
            lines.append(f"  {'-' * name_width}  {'-' * exact_width}")
        lines.append(f"  {name:<{name_width}}  {text:>{exact_width}}  {humanize(value)}")
    return "\n".join(lines)


class Breakdown:
    """A count split into lines that add up to its total: the records behind the tables.

    Mixed into a frozen dataclass whose ``LINES`` name each line as ``(label, attribute)``; a
    label may name attributes in braces, filled from the record (``"MLP, m = {mlp_multiplier}"``).
    Other attributes (a count's settings, say) are not lines.
    """

    LINES: ClassVar[tuple[tuple[str, str], ...]] = ()

    @property
    def total(self) -> int:
        return sum(getattr(self, attribute) for _, attribute in self.LINES)

    def rows(self) -> tuple[tuple[str, int], ...]:
        """``(label, value)`` pairs for :func:`format_table`, ending with ``("total", ...)``."""
        lines = [(label.format_map(vars(self)), getattr(self, attribute)) for label, attribute in self.LINES]
        return (*lines, ("total", self.total))
