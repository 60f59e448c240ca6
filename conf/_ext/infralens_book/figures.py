"""Figures a reader can read: every figure has a caption, and every image an alt text.

- ``{record-figure} <record> <figure>`` places a figure of a GPU record (``fig-1``, ...) where the
  prose wants it, with the directive's content as its caption (Markdown, like every sentence of
  the book). The record's box under its GPU cell then leaves that figure out. A record not yet
  measured gives a short note instead of a figure.
- An image inside a captioned figure with no alt text of its own (or only a file name) takes the
  caption's text as its alt text, so a screen reader says what the figure shows.
"""

from __future__ import annotations

import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from infralens.tools.cells import records

PLACED = re.compile(r"^[`:]{3,}\{record-figure\}\s+(\S+)\s+(\S+)\s*$", re.MULTILINE)


def placed_figures(text: str) -> set[tuple[str, str]]:
    """(record, figure) pairs that ``{record-figure}`` directives of a page place."""
    return set(PLACED.findall(text))


class RecordFigure(SphinxDirective):
    required_arguments = 2  # record id, figure stem
    has_content = True
    option_spec = {"name": directives.unchanged, "alt": directives.unchanged,
                   "width": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        record_id, stem = self.arguments
        book = Path(self.env.srcdir)
        try:
            rec = records.latest(record_id, book)
        except records.RecordError as err:  # one line naming the file
            raise self.error(str(err)) from None
        if rec is None:
            note = nodes.paragraph("", "", nodes.emphasis(
                "", f"The figure of GPU record {record_id} appears once the record is measured."))
            return [note]
        if stem not in rec.figures:
            raise self.error(f"record {record_id} has no figure {stem!r} (it has {', '.join(rec.figures)})")
        self.env.note_dependency(str(records.index_path(book)))
        rel = (rec.path / stem).relative_to(book).as_posix()
        fence = ":" * 4
        lines = [f"{fence}{{figure}} /{rel}.*", f":width: {self.options.get('width', '95%')}"]
        lines += [f":{key}: {self.options[key]}" for key in ("name", "alt") if key in self.options]
        lines += ["", *self.content, fence]
        holder = nodes.Element()
        self.state.nested_parse(StringList(lines, source=self.get_source_info()[0]), self.content_offset,
                                holder)
        return holder.children


def alt_from_captions(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """After references are resolved (a caption's {ref} reads as its title, not its label)."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None:
            continue
        text = " ".join(caption.astext().split())
        for image in figure.findall(nodes.image):
            alt = image.get("alt", "")
            if not alt or "/" in alt or re.fullmatch(r"[\w.-]+ fig-\d+", alt):
                image["alt"] = text


def setup(app: Sphinx) -> None:
    app.add_directive("record-figure", RecordFigure)
    app.connect("doctree-resolved", alt_from_captions)
