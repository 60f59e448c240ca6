"""Figures, tables and exercises are numbered within their page.

Without a numbered toctree Sphinx numbers every enumerable node (figures, tables, code blocks,
sphinx-exercise's exercises) with one counter across the whole book, so a lab's first exercise
can be "Exercise 31". The book keeps chapter numbers in its titles, so a numbered toctree (which
would number every heading too) is not wanted; instead each page's numbers restart at 1, in the
order Sphinx assigned them.

Sphinx decides which pages to rewrite by comparing the new book-wide numbers with the previous
ones, so the book-wide numbers are put back before Sphinx assigns them and replaced by per-page
numbers after: a page is rewritten only when its numbers really changed.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

SPHINX = 500  # the priority of Sphinx's own toctree collector


def restore_book_wide(app: Sphinx, env: BuildEnvironment) -> list[str]:
    env.toc_fignumbers = getattr(env, "infralens_book_wide_fignumbers", env.toc_fignumbers)
    return []


def number_per_page(app: Sphinx, env: BuildEnvironment) -> list[str]:
    env.infralens_book_wide_fignumbers = env.toc_fignumbers
    env.toc_fignumbers = {
        doc: {figtype: {node_id: (i,) for i, (node_id, _) in
                        enumerate(sorted(numbers.items(), key=lambda item: item[1]), start=1)}
              for figtype, numbers in by_type.items()}
        for doc, by_type in env.toc_fignumbers.items()
    }
    return []


def setup(app: Sphinx) -> None:
    app.connect("env-get-updated", restore_book_wide, priority=SPHINX - 1)
    app.connect("env-get-updated", number_per_page, priority=SPHINX + 1)
