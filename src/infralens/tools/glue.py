"""What an executed page uses to hand numbers to its prose: glued text, tables, GPU records.

A page's cells compute; its sentences live in Markdown and take numbers from the cells through
myst-nb's glue (``{glue:text}`key```). These helpers are the only way a page does that, so that
every page formats and checks the same way:

* :func:`glue_text` glues one value as text (``g`` is the short name pages import);
* :func:`glue_figure` glues a matplotlib figure for ``{glue:figure}`` and closes it;
* :func:`markdown_table` builds a Markdown table (pure text), :func:`md_table` shows one;
* :func:`record` returns the latest GPU record of a cell, or stops the build with one line that
  says how to make it;
* :func:`repo_relative` strips the checkout's absolute path from text a page prints (compiler
  logs, registration sites), so output does not depend on where the book was built.

Importing this module imports neither IPython nor myst-nb: they are imported when called.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

__all__ = ["glue_text", "g", "glue_figure", "markdown_table", "md_table", "record", "MissingRecord",
           "repo_relative"]

_REPO = str(Path(__file__).resolve().parents[3]) + "/"

_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def glue_text(key: str, value: object) -> None:
    """Glue ``str(value)`` under ``key`` for ``{glue:text}`key``` (nothing is displayed).

    myst-nb shows the text/plain form of a glued value with its quotes removed by
    ``ast.literal_eval``, so any string, apostrophes and quotes included, comes out verbatim.
    """
    from myst_nb import glue

    if not _KEY.match(key):
        raise ValueError(f"glue key {key!r}: use letters, digits and underscores")
    glue(key, str(value), display=False)


#: The short name pages use: ``g("h100_sms", 132)``.
g = glue_text


def glue_figure(key: str, fig) -> None:
    """Glue a matplotlib figure under ``key`` (for ``{glue:figure}``) and close it, so the cell
    shows nothing and the figure appears only where the text places it."""
    import matplotlib.pyplot as plt
    from myst_nb import glue

    if not _KEY.match(key):
        raise ValueError(f"glue key {key!r}: use letters, digits and underscores")
    glue(key, fig, display=False)
    plt.close(fig)


def markdown_table(header: Sequence[object], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown (MyST) table: one header row, one row per item; cells are ``str()``-ed.

    A cell may hold MyST roles (``{cite:p}`...```); a ``|`` inside a cell is escaped.
    """
    def cell(value: object) -> str:
        return str(value).replace("|", r"\|")

    header = list(header)
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        row = list(row)
        if len(row) != len(header):
            raise ValueError(f"a row has {len(row)} cells, the header {len(header)}: {row!r}")
        lines.append("| " + " | ".join(cell(c) for c in row) + " |")
    return "\n".join(lines)


def md_table(header: Sequence[object], rows: Iterable[Sequence[object]]):
    """:func:`markdown_table` as a displayable ``IPython.display.Markdown``."""
    from IPython.display import Markdown

    return Markdown(markdown_table(header, rows))


class MissingRecord(LookupError):
    """A page quotes a GPU record that does not exist."""


def record(record_id: str, book: Path | None = None):
    """The latest :class:`~infralens.tools.cells.records.Record` of ``record_id``.

    A page that quotes a measurement cannot be built without it, so a missing record raises
    :class:`MissingRecord` with the command that makes it.
    """
    from infralens.tools.cells.records import latest

    found = latest(record_id, book)
    if found is None:
        raise MissingRecord(
            f"GPU record {record_id!r} does not exist: run `python -m infralens.tools.cells run "
            f"--record {record_id}` on a CUDA machine, then `unpack` its archive here")
    return found


def repo_relative(text: str) -> str:
    """``text`` with this checkout's absolute path removed (``/…/src/x.py`` -> ``src/x.py``)."""
    return text.replace(_REPO, "")
