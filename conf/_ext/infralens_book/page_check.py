"""Run one page's CPU cells as the book build would, without Sphinx, and report what is wrong.

    python -m infralens_book page book/labs/lab04-reduce.md [...]

For each page: the cells run in a fresh kernel with the build's environment (Triton in the
interpreter, the book's IPython profile), GPU cells skipped; the report names a failing cell,
anything a cell wrote to stderr, and every ``{glue:...}`` key the page's text uses that no cell
glued. It takes the page's cells' time instead of a whole-book build: the way to check a page
while writing it. The book build itself remains the judge.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

GLUE_ROLE = re.compile(r"\{glue(?::[a-z]+)?\}`([A-Za-z_][A-Za-z0-9_]*)(?:[^`]*)`")
GLUE_DIRECTIVE = re.compile(r"^\s*[`:]{3,}\{glue(?::[a-z]+)?\}\s+([A-Za-z_][A-Za-z0-9_]*)", re.M)

ROOT = Path(__file__).resolve().parents[3]


def used_glue_keys(text: str) -> set[str]:
    """Keys the page's Markdown pastes (roles and directives)."""
    return set(GLUE_ROLE.findall(text)) | set(GLUE_DIRECTIVE.findall(text))


def _kernel_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(TRITON_INTERPRET="1", IPYTHONDIR=str(ROOT / "conf" / "ipython"),
               INFRALENS_BOOK=str(ROOT / "book"), PYTHONHASHSEED="0")
    return env


def check_page(page: Path) -> tuple[list[str], float]:
    """(problems, seconds) for one page."""
    import nbclient
    from myst_nb.core.read import read_myst_markdown_notebook

    from .notebooks import transform

    text = page.read_text(encoding="utf-8")
    notebook = transform(read_myst_markdown_notebook(text, path=page), str(page), ROOT / "book")
    problems: list[str] = []
    saved = dict(os.environ)
    os.environ.update(_kernel_env())  # the kernel inherits this process's environment
    start = time.perf_counter()
    try:
        client = nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3",
                                         resources={"metadata": {"path": str(page.parent)}})
        client.execute()
    except nbclient.exceptions.CellExecutionError as err:
        problems.append(f"a cell failed:\n{err}")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    seconds = time.perf_counter() - start
    glued = set()
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            if out.get("name") == "stderr":
                problems.append(f"a cell wrote to stderr: {out.get('text', '').strip()[:300]}")
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name:
                glued.add(name)
    if not problems:
        problems += [f"the text uses glue key {k!r}, which no cell glues"
                     for k in sorted(used_glue_keys(text) - glued)]
    return problems, seconds
