"""References labelled by author and year, in the list as in the text.

The text cites author-year ("Dao et al. [2022]", sphinxcontrib-bibtex's ``author_year`` style),
so the list of references uses the same labels ("[Dao et al., 2022]") instead of numbers, in the
web book and in the PDF alike: a reader finds a citation in the list by what the text printed.
"""

from __future__ import annotations

import re
from collections import Counter

from pybtex.plugin import register_plugin
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle


def _plain(text: str) -> str:
    return re.sub(r"[{}\\]", "", text)


class AuthorYearLabels(BaseLabelStyle):
    """``Last``, ``Last and Other`` or ``Last et al.``, then the year; a, b, ... when two match."""

    def format_label(self, entry) -> str:
        people = entry.persons.get("author") or entry.persons.get("editor") or []
        lasts = [_plain(" ".join(p.last_names)) for p in people]
        if not lasts:
            who = _plain(entry.fields.get("organization") or entry.fields.get("publisher")
                         or entry.fields.get("title", entry.key))
        elif len(lasts) == 1:
            who = lasts[0]
        elif len(lasts) == 2:
            who = f"{lasts[0]} and {lasts[1]}"
        else:
            who = f"{lasts[0]} et al."
        return f"{who}, {entry.fields.get('year', 'n.d.')}"

    def format_labels(self, sorted_entries):
        labels = [self.format_label(entry) for entry in sorted_entries]
        total, seen = Counter(labels), Counter()
        for label in labels:
            if total[label] == 1:
                yield label
            else:
                yield label + chr(ord("a") + seen[label])
                seen[label] += 1


class AuthorYearStyle(PlainStyle):
    default_label_style = "infralens-author-year"


def register() -> None:
    register_plugin("pybtex.style.labels", "infralens-author-year", AuthorYearLabels, force=True)
    register_plugin("pybtex.style.formatting", "infralens", AuthorYearStyle, force=True)
