"""Math without the network: MathJax is served from the book itself.

Sphinx loads MathJax from a CDN unless ``mathjax_path`` names a local copy. The copy comes from
the ``sphinx-mathjax-offline`` wheel (MathJax 3, installed with the book's dependencies); only
the files a page can ask for are copied into ``_static/mathjax``: the ``tex-chtml`` component,
the TeX extensions it autoloads, the CHTML fonts and the ``ui`` components (the lazy typesetter
the book turns on, so a long page typesets only the math near the screen, and the menu).
"""

from __future__ import annotations

import importlib.metadata
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

DIST = "sphinx-mathjax-offline"
COMPONENT = "tex-chtml.js"
NEEDED = (COMPONENT, "input/tex/extensions", "output/chtml", "ui")


def mathjax_source() -> Path:
    """The folder of the installed MathJax distribution (the one holding tex-chtml.js)."""
    try:
        files = importlib.metadata.files(DIST) or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == COMPONENT and file.parent.name == "mathjax":
            return Path(file.locate()).parent
    raise ExtensionError(f"MathJax not found: install the book's dependencies ({DIST})")


def _copy(src: Path, dst: Path) -> None:
    if src.is_dir():
        for child in src.iterdir():
            _copy(child, dst / child.name)
    elif not dst.exists() or dst.stat().st_size != src.stat().st_size:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def install(app: Sphinx) -> None:
    """Copy MathJax next to the pages before they are written (HTML builders only)."""
    if app.builder.format != "html":
        return
    source = mathjax_source()
    for part in NEEDED:
        _copy(source / part, Path(app.outdir) / "_static" / "mathjax" / part)
