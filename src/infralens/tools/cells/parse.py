"""Find the code cells of a MyST-NB text notebook without Jupyter.

The lent GPU machine has no myst-nb, jupytext or nbformat, so the GPU runner reads pages with this
small parser. A test checks that it finds the same cells, with the same source and options, as
myst-nb's own reader does in the CPU build.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

_FENCE = re.compile(r"^(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[a-z-]+)\}\s*(?P<argument>.*)$")
_OPTION = re.compile(r"^:(?P<key>[A-Za-z0-9_-]+):(?:\s+(?P<value>.*))?$")


@dataclass(frozen=True)
class CodeCell:
    page: str          # path of the page relative to the book folder, without suffix
    index: int         # position among the page's code cells, from 0
    line: int          # 1-based line of the opening fence
    source: str
    options: dict = field(default_factory=dict)

    @property
    def tags(self) -> list[str]:
        return list(self.options.get("tags") or [])

    @property
    def is_gpu(self) -> bool:
        return "gpu" in self.tags

    @property
    def record(self) -> str | None:
        return self.options.get("record")


def _split_options(body: list[str]) -> tuple[dict, list[str]]:
    """Options either as a leading `---` YAML block or as leading `:key: value` lines."""
    if body and body[0].strip() == "---":
        end = next((i for i in range(1, len(body)) if body[i].strip() == "---"), None)
        if end is None:
            raise ValueError("unterminated '---' option block in a code-cell")
        options = yaml.safe_load("\n".join(body[1:end])) or {}
        return options, body[end + 1:]
    options: dict = {}
    i = 0
    while i < len(body) and (match := _OPTION.match(body[i])):
        value = match.group("value")
        options[match.group("key")] = yaml.safe_load(value) if value else None
        i += 1
    return options, body[i:]


@dataclass(frozen=True)
class Directive:
    name: str
    line: int          # 1-based line of the opening fence
    argument: str
    options: dict
    body: str


def directives(text: str, name: str) -> list[Directive]:
    """Every fenced ``{name}`` directive of a MyST page, in order (top level or nested)."""
    lines = text.splitlines()
    found: list[Directive] = []
    for i, line in enumerate(lines):
        match = _FENCE.match(line.lstrip())
        if not match or match.group("name") != name:
            continue
        fence = match.group("fence")
        j = i + 1
        while j < len(lines) and not (
            lines[j].strip().startswith(fence) and lines[j].strip().strip(fence[0]) == ""
        ):
            j += 1
        body = [b[len(line) - len(line.lstrip()):] for b in lines[i + 1:j]]
        options, rest = _split_options(body)
        found.append(Directive(name, i + 1, match.group("argument").strip(), options,
                               "\n".join(rest).strip("\n")))
    return found


def parse_cells(text: str, page: str = "") -> list[CodeCell]:
    """All ``{code-cell}`` blocks of a MyST text notebook, in order."""
    return [CodeCell(page, n, d.line, d.body, d.options)
            for n, d in enumerate(directives(text, "code-cell"))]


def is_notebook(text: str) -> bool:
    """True for a MyST text notebook (a page with a jupytext or mystnb top matter)."""
    if not text.startswith("---"):
        return False
    end = text.find("\n---", 3)
    if end < 0:
        return False
    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError:
        return False
    fmt = (meta.get("jupytext") or {}).get("text_representation", {}).get("format_name")
    return meta.get("file_format") == "mystnb" or fmt == "myst"


def book_pages(book: Path) -> list[Path]:
    """Every notebook page of the book, sorted, ignoring build and record folders."""
    return sorted(
        p for p in book.rglob("*.md")
        if not any(part.startswith(("_", ".")) for part in p.relative_to(book).parts[:-1])
        and is_notebook(p.read_text(encoding="utf-8"))
    )


def gpu_cells(book: Path) -> list[CodeCell]:
    """Every GPU cell of the book, in page order."""
    found = []
    for path in book_pages(book):
        page = path.relative_to(book).with_suffix("").as_posix()
        found += [c for c in parse_cells(path.read_text(encoding="utf-8"), page) if c.is_gpu]
    return found
