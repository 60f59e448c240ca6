"""How the book's executed pages are read: GPU cells and never-stale outputs.

myst-nb turns each MyST text notebook into a notebook before executing it through jupyter-cache.
This module post-processes that notebook:

* a cell tagged ``gpu`` gets ``skip-execution`` (the CPU build never runs it), and a Markdown cell
  after it shows the cell's latest GPU record with its provenance, or says it is not measured yet;
* the first code cell carries a fingerprint of every file the page's outputs depend on
  (deps.py), so jupyter-cache re-executes the page when, and only when, one of them changes.

Sphinx is told about the same files (``env.note_dependency``), so it re-reads a page whose
imported modules or records changed even when the page itself did not.
"""

from __future__ import annotations

import functools
from pathlib import Path

import myst_nb.sphinx_
import nbformat
from sphinx.application import Sphinx
from sphinx.util import logging

from infralens.tools.cells import records
from infralens.tools.cells.parse import is_notebook, parse_cells

from . import deps, figures

logger = logging.getLogger(__name__)
FINGERPRINT_KEY = "infralens_depends_on"


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run at the start of a line of `text`."""
    runs = [len(line) - len(line.lstrip("`")) for line in text.splitlines()]
    return "`" * max(3, max(runs, default=0) + 1)


def record_markdown(record_id: str | None, source: str, book: Path,
                    placed: set[tuple[str, str]] = frozenset()) -> str:
    """The Markdown shown under a GPU cell: its latest record, or why there is none. Figures the
    page places with ``{record-figure}`` (the pairs in ``placed``) are left out here."""
    if not record_id:
        return (":::{error}\nThis GPU cell names no record (`:record: <id>`), so its results "
                "cannot be shown.\n:::")
    try:
        rec = records.latest(record_id, book)
    except records.RecordError as err:  # one line naming the file, and the build fails (-W)
        logger.warning("%s", err, type="infralens", subtype="records")
        return f":::{{error}}\nGPU record `{record_id}` cannot be read: {err}\n:::"
    if rec is None:
        return (f":::{{admonition}} GPU cell `{record_id}`: not measured yet\n:class: gpu-record "
                "gpu-record-missing\nThis cell runs only on a CUDA GPU (`nox -s gpu`, or "
                "`python -m infralens.tools.cells run`). No record exists for it yet, so the book shows "
                "no numbers from it.\n:::")
    parts = [f"::::{{admonition}} GPU record `{record_id}`\n:class: gpu-record",
             f"**Measured on** {rec.provenance_line}."]
    if not rec.is_current(source):
        parts.append("*The cell's code has changed since this record was made: these results "
                     "come from the earlier code. Run `nox -s gpu` to refresh them.*")
    if rec.stdout.strip():
        fence = _fence(rec.stdout)
        parts.append(f"{fence}text\n{rec.stdout.rstrip()}\n{fence}")
    for stem in rec.figures:
        if (record_id, stem) in placed:
            continue
        rel = (rec.path / stem).relative_to(book).as_posix()
        parts.append(f"```{{image}} /{rel}.*\n:alt: {record_id} {stem}\n:width: 95%\n```")
    parts.append("::::")
    return "\n\n".join(parts)


def transform(notebook: nbformat.NotebookNode, path: str, book: Path) -> nbformat.NotebookNode:
    """Mark GPU cells, insert their record displays, and fingerprint the page's dependencies."""
    code = [c for c in notebook.cells if c.cell_type == "code"]
    if not code:
        return notebook
    cpu_sources = [c.source for c in code if "gpu" not in c.metadata.get("tags", [])]
    code[0].metadata[FINGERPRINT_KEY] = deps.fingerprint(deps.dependency_files(cpu_sources, book))
    source_map = notebook.metadata.get("source_map")
    placed = set().union(*(figures.placed_figures(c.source) for c in notebook.cells
                            if c.cell_type == "markdown"))
    cells, lines = [], []
    for n, cell in enumerate(notebook.cells):
        cells.append(cell)
        line = source_map[n] if source_map else 0
        lines.append(line)
        if cell.cell_type == "code" and "gpu" in cell.metadata.get("tags", []):
            tags = cell.metadata.setdefault("tags", [])
            if "skip-execution" not in tags:
                tags.append("skip-execution")
            shown = record_markdown(cell.metadata.get("record"), cell.source, book, placed)
            cells.append(nbformat.v4.new_markdown_cell(shown))
            lines.append(line)
    notebook.cells = cells
    if source_map:
        notebook.metadata["source_map"] = lines
    return notebook


def install(app: Sphinx) -> None:
    """Wrap myst-nb's reader so every notebook it reads goes through `transform`."""
    original = myst_nb.sphinx_.create_nb_reader
    if getattr(original, "_infralens", False):
        return
    book = Path(app.srcdir)

    @functools.wraps(original)
    def create_nb_reader(path, md_config, nb_config, content):
        reader = original(path, md_config, nb_config, content)
        if reader is None:
            return None
        read = reader.read
        reader.read = lambda text: transform(read(text), path, book)
        return reader

    create_nb_reader._infralens = True
    myst_nb.sphinx_.create_nb_reader = create_nb_reader


def note_dependencies(app: Sphinx, docname: str, source: list[str]) -> None:
    """Tell Sphinx which src modules and records a page's executed cells depend on."""
    text = source[0]
    if not is_notebook(text):
        return
    cells = parse_cells(text)
    book = Path(app.srcdir)
    for path in deps.dependency_files([c.source for c in cells if not c.is_gpu], book):
        app.env.note_dependency(str(path))
    # A new run adds a folder, and Sphinx watches only files: the runner rewrites one index.
    named = any(c.is_gpu for c in cells) or deps.records_named([c.source for c in cells], book)
    index = records.index_path(book)
    if named and index.is_file():  # a missing file would make Sphinx re-read the page every time
        app.env.note_dependency(str(index))
