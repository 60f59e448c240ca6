"""The InfraLens book's Sphinx extension.

- notebooks.py: GPU cells (skipped, shown with their latest record) and dependency fingerprints
  that keep executed outputs in step with src/ and with the GPU records;
- annotated.py: literalinclude by markers, emphasis chosen by pins (checked on every build);
- anchors.py: the anchor registry (checked on every build), stable URLs (a/<label>.html) and
  the cite buttons;
- offline_math.py: MathJax served from the book, so no page needs the network;
- figures.py: GPU-record figures placed in the prose with a caption; alt text from captions;
- numbering.py: figures, tables and exercises numbered within their page;
- citations.py: the list of references labelled by author and year, as the text cites them;
- print_edition.py: the PDF's parts, folded setup code left out, answers at the end of each page;
- translations.py: the translated editions' pages and catalogs, and glued numbers in translations.
"""

from __future__ import annotations

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

from . import (
    anchors,
    annotated,
    citations,
    figures,
    notebooks,
    numbering,
    offline_math,
    print_edition,
    translations,
)

HTML_ONLY_PAGES = {"genindex", "modindex", "search"}


def drop_html_only_pages(app: Sphinx, doctree: nodes.document) -> None:
    """The index page exists in the HTML build only; LaTeX prints its own index at the end."""
    if app.builder.format == "html":
        return
    for toctree in doctree.findall(addnodes.toctree):
        toctree["entries"] = [(t, ref) for t, ref in toctree["entries"] if ref not in HTML_ONLY_PAGES]
        toctree["includefiles"] = [f for f in toctree["includefiles"] if f not in HTML_ONLY_PAGES]


def setup(app: Sphinx) -> dict:
    app.add_config_value("infralens_anchor_registry", "", "env")
    citations.register()
    app.add_directive("literalinclude", annotated.PinnedLiteralInclude, override=True)
    app.connect("builder-inited", notebooks.install)
    app.connect("builder-inited", offline_math.install)
    app.connect("source-read", notebooks.note_dependencies)
    app.connect("doctree-read", drop_html_only_pages)
    app.connect("env-get-outdated", annotated.reread_problem_docs)
    app.connect("env-purge-doc", annotated.purge_doc)
    app.connect("env-merge-info", annotated.merge_info)
    app.connect("doctree-resolved", anchors.add_cite_buttons)
    app.connect("build-finished", anchors.check_registry)
    app.connect("build-finished", anchors.write_stable_urls)
    numbering.setup(app)
    figures.setup(app)
    print_edition.setup(app)
    translations.install(app)
    return {"version": "0.1", "parallel_read_safe": True, "parallel_write_safe": True}
