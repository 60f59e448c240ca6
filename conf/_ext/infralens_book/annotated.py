"""Annotated source that cannot drift: `literalinclude` by markers, emphasis chosen by pins.

A page includes a region of a real file between two marker lines and names the lines to
emphasize by a piece of their text:

    :start-after: "# [memory:attention]"
    :end-before: "# [/memory:attention]"
    :pins: ["kv_dim = ", "if shape.qkv_bias"]

Each pin must occur in exactly one line of the region (a pin listed n times, in exactly n
lines); those lines are emphasized. There is no
separate list of line numbers to keep in step: if an edit to the source removes a pinned line,
or makes a pin ambiguous, the include reports it. A page with such a problem is re-read (and
reported) on every build until the source or the pin is fixed, so a rebuild never passes with
the wrong line highlighted; the same check runs in the tests without a build. Regions of files
under src/ must be selected by markers, never by line numbers, and `:emphasize-lines:` is not
accepted on them.
"""

from __future__ import annotations

import json
from pathlib import Path

from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.directives.code import LiteralInclude
from sphinx.environment import BuildEnvironment
from sphinx.util import logging

logger = logging.getLogger(__name__)
PROBLEM_DOCS = "infralens_annotation_problems"  # env attribute: docname -> problems


def parse_pins(value) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    pins = json.loads(value)
    if not isinstance(pins, list) or not all(isinstance(p, str) and p for p in pins):
        raise ValueError("':pins:' must be a JSON list of non-empty strings")
    if any(" #" in p for p in pins):  # MyST reads " #..." in a directive option as a comment
        raise ValueError("a pin may not contain ' #' (MyST drops the rest of the option line): "
                         "pin the code before the comment")
    return pins


def region(text: str, start_after: str | None, end_before: str | None) -> tuple[list[str], list[str]]:
    """The included lines (as literalinclude selects them) and the problems with the markers."""
    lines = text.splitlines()
    problems = []
    for marker in (start_after, end_before):
        if marker is not None and sum(marker in line for line in lines) != 1:
            count = sum(marker in line for line in lines)
            problems.append(f"marker {marker!r} occurs {count} times in the file (needs exactly 1)")
    if problems:
        return [], problems
    if start_after is not None:
        lines = lines[next(i for i, line in enumerate(lines) if start_after in line) + 1:]
    if end_before is not None:
        end = next((i for i, line in enumerate(lines) if end_before in line), None)
        if end is None:
            return [], [f"end marker {end_before!r} comes before the start marker"]
        lines = lines[:end]
    return lines, []


def pinned_lines(lines: list[str], pins: list[str]) -> tuple[list[int], list[str]]:
    """1-based numbers of the lines the pins choose, and the problems (missing or ambiguous pins).

    A pin given once must occur in exactly one line; a pin given n times (the same text on n
    lines, all emphasized) must occur in exactly n lines.
    """
    chosen, problems = [], []
    for pin in dict.fromkeys(pins):
        wanted = pins.count(pin)
        hits = [n for n, line in enumerate(lines, start=1) if pin in line]
        if len(hits) == wanted:
            chosen += hits
        elif not hits:
            problems.append(f"no line of the region contains the pin {pin!r}: the source moved")
        else:
            problems.append(f"the pin {pin!r} is in {len(hits)} lines of the region "
                            f"({', '.join(map(str, hits))}), not {wanted}: make it longer")
    return sorted(chosen), problems


def check(path: Path, options: dict) -> tuple[list[int], list[str]]:
    """The lines to emphasize in one literalinclude of `path`, and its problems (empty when sound)."""
    under_src = "src" in path.resolve().parts
    problems = []
    if under_src and ("lines" in options or "start-after" not in options
                      or "end-before" not in options):
        problems.append("include a region of src by its markers (:start-after: and :end-before:), "
                        "not by line numbers or whole")
    if under_src and "emphasize-lines" in options:
        problems.append("choose emphasized lines with ':pins:' alone, not ':emphasize-lines:'")
    if not path.is_file():
        return [], problems + [f"file not found: {path}"]
    lines, found = region(path.read_text(encoding="utf-8"), options.get("start-after"),
                          options.get("end-before"))
    problems += found
    if found or "pins" not in options:
        return [], problems
    try:
        pins = parse_pins(options["pins"])
    except (ValueError, json.JSONDecodeError) as err:
        return [], problems + [str(err)]
    chosen, found = pinned_lines(lines, pins)
    return chosen, problems + found


class PinnedLiteralInclude(LiteralInclude):
    """Sphinx's literalinclude, with `:pins:` choosing the emphasized lines."""

    option_spec = {**LiteralInclude.option_spec, "pins": directives.unchanged_required}

    def run(self):
        env = self.state.document.settings.env
        _, filename = env.relfn2path(self.arguments[0], env.docname)
        chosen, problems = check(Path(filename), self.options)
        for problem in problems:
            logger.warning("annotated include of %s: %s", self.arguments[0], problem,
                           location=self.get_location(), type="infralens", subtype="annotation")
        if problems:
            _problem_docs(env).setdefault(env.docname, []).extend(problems)
        if "pins" in self.options:
            self.options.pop("pins")
            if chosen:
                self.options["emphasize-lines"] = ",".join(map(str, chosen))
        return super().run()


def _problem_docs(env: BuildEnvironment) -> dict[str, list[str]]:
    return vars(env).setdefault(PROBLEM_DOCS, {})


def reread_problem_docs(app: Sphinx, env: BuildEnvironment, added, changed, removed) -> list[str]:
    """Pages whose includes had problems are read again on every build, so they fail every build."""
    return sorted(_problem_docs(env))


def purge_doc(app: Sphinx, env: BuildEnvironment, docname: str) -> None:
    _problem_docs(env).pop(docname, None)


def merge_info(app: Sphinx, env: BuildEnvironment, docnames, other: BuildEnvironment) -> None:
    _problem_docs(env).update({d: p for d, p in _problem_docs(other).items() if d in docnames})
