"""ruff over the code cells of every page.

Each notebook page is read with myst-nb's own reader into a Jupyter notebook (``_build/lint/``),
which ruff lints cell by cell with the project's configuration; findings are reported at the
page's own line numbers. ``nox -s lint`` and CI run it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BOOK = ROOT / "book"
OUT = ROOT / "_build" / "lint"
#: Extra ruff arguments for page cells (none: pages follow the package's rules).
EXTRA: tuple[str, ...] = ()


def _cell_starts(text: str) -> list[int]:
    """1-based page line of the first code line of each code cell, in order."""
    from infralens.tools.cells.parse import parse_cells

    lines = text.splitlines()
    starts = []
    for cell in parse_cells(text):
        first = cell.source.splitlines()[0] if cell.source.strip() else ""
        n = cell.line  # the fence line; the body follows its options
        while n < len(lines) and lines[n] != first:
            n += 1
        starts.append(n + 1)
    return starts


def export(book: Path = BOOK, out: Path = OUT) -> dict[Path, tuple[Path, list[int]]]:
    """Write one .ipynb per notebook page; return {notebook: (page, first line of each cell)}."""
    import nbformat
    from myst_nb.core.read import read_myst_markdown_notebook

    from infralens.tools.cells.parse import book_pages

    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.ipynb"):
        old.unlink()
    exported = {}
    for page in book_pages(book):
        text = page.read_text(encoding="utf-8")
        notebook = read_myst_markdown_notebook(text, path=page)
        notebook.cells = [c for c in notebook.cells if c.cell_type == "code"]
        for cell in notebook.cells:
            cell.source = "\n".join(line if not line.lstrip().startswith(("%", "!")) else "# " + line
                                    for line in cell.source.splitlines())
        target = out / (page.relative_to(book).with_suffix("").as_posix().replace("/", "__") + ".ipynb")
        nbformat.write(notebook, target)
        exported[target] = (page, _cell_starts(text))
    return exported


def lint(book: Path = BOOK) -> list[str]:
    """ruff's findings in the pages' code, as 'page.md:line:col: CODE message'."""
    exported = export(book)
    if not exported:
        return []
    # The exported notebooks live under _build/, where ruff cannot tell that `infralens` is this
    # project's own package: say so, so imports sort as they do in src.
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "json",
                           "--no-cache", "--config", "lint.isort.known-first-party = ['infralens']",
                           *EXTRA, *map(str, exported)], cwd=ROOT, capture_output=True,
                          text=True)
    if proc.returncode not in (0, 1):
        return [f"ruff failed: {proc.stderr.strip()}"]
    found = []
    for item in json.loads(proc.stdout or "[]"):
        page, starts = exported[Path(item["filename"])]
        cell = item.get("cell") or 1
        row = starts[cell - 1] + item["location"]["row"] - 1 if cell - 1 < len(starts) else 0
        found.append(f"{page.relative_to(ROOT)}:{row}:{item['location']['column']}: "
                     f"{item['code']} {item['message']}")
    return sorted(found)
