"""Stable, citable anchors.

Every page and every section a reader may cite carries an explicit MyST label, e.g.
``(lab01-kv-cache)=`` above ``## KV cache``. ``conf/anchors.json`` is the committed registry of
those labels (and of glossary terms). The tests compare the book with the registry: an anchor
never disappears or moves silently. Renaming one means adding a redirect from the old label in
the registry, deliberately.

In the HTML build every label also gets a page ``a/<label>.html`` that forwards to wherever the
label lives now; that path is the stable URL a citation uses, and each labelled heading has a
button that copies such a citation.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from infralens.tools.cells.parse import directives

logger = logging.getLogger(__name__)

LABEL = re.compile(r"^\((?P<label>[A-Za-z0-9][A-Za-z0-9_.:-]*)\)=\s*$")
HEADING = re.compile(r"^(?P<hashes>#{1,6})\s+(?P<title>.+?)\s*$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


@dataclass(frozen=True)
class Anchor:
    label: str
    doc: str
    title: str
    line: int


CODE_DIRECTIVES = {"code-cell", "code-block", "code", "sourcecode", "literalinclude", "math",
                   "raw", "glue:figure", "mermaid"}


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside the top matter and outside code: fenced code blocks and
    code-like directives are skipped, the bodies of prose directives (notes, exercises) kept."""
    lines = text.splitlines()
    start = 0
    if lines and lines[0].strip() == "---":
        start = next((i + 1 for i in range(1, len(lines)) if lines[i].strip() == "---"), 0)
    out, fence = [], None
    for n, line in enumerate(lines[start:], start=start + 1):
        stripped = line.strip()
        if fence is not None:
            if stripped.startswith(fence) and stripped.strip(fence[0]) == "":
                fence = None
            continue
        match = FENCE.match(line)
        if match:
            info = stripped[len(match.group(1)):].strip()
            name = info[1:info.index("}")] if info.startswith("{") and "}" in info else None
            if name is None or name in CODE_DIRECTIVES:
                fence = match.group(1)
                continue
        out.append((n, line))
    return out


def scan(text: str, doc: str) -> tuple[list[Anchor], list[str]]:
    """The labels of one page and its headings (levels 1-3) that have no label above them."""
    anchors, unlabelled = [], []
    lines = _prose_lines(text)
    pending: tuple[int, str] | None = None
    for n, line in lines:
        if (m := LABEL.match(line)):
            if pending:
                anchors.append(Anchor(pending[1], doc, "", pending[0]))
            pending = (n, m.group("label"))
            continue
        if not line.strip():
            continue
        heading = HEADING.match(line)
        if heading and len(heading.group("hashes")) <= 3 and not pending:
            unlabelled.append(f"{doc}.md:{n}: heading {heading.group('title')!r} has no label")
        if pending:
            title = heading.group("title") if heading else ""
            anchors.append(Anchor(pending[1], doc, title, pending[0]))
            pending = None
    if pending:
        anchors.append(Anchor(pending[1], doc, "", pending[0]))
    return anchors, unlabelled


def glossary_terms(text: str) -> list[str]:
    terms = []
    for block in directives(text, "glossary"):
        for line in block.body.splitlines():
            if line.strip() and not line[0].isspace():
                terms.append(line.strip())
    return terms


def collect(book: Path) -> tuple[dict[str, dict], list[str]]:
    """{label: {doc, title}} for the whole book (plus `term:<Term>` for glossary terms), and
    the problems found (unlabelled headings, duplicate labels)."""
    found: dict[str, dict] = {}
    problems: list[str] = []
    for path in sorted(book.rglob("*.md")):
        rel = path.relative_to(book)
        if any(part.startswith(("_", ".")) for part in rel.parts):
            continue
        doc = rel.with_suffix("").as_posix()
        text = path.read_text(encoding="utf-8")
        anchors, unlabelled = scan(text, doc)
        problems += unlabelled
        for a in anchors:
            if a.label in found:
                problems.append(f"{doc}.md:{a.line}: label {a.label!r} also in {found[a.label]['doc']}")
            found[a.label] = {"doc": doc, "title": a.title}
        for term in glossary_terms(text):
            found[f"term:{term}"] = {"doc": doc, "title": term}
    return found, problems


def load_registry(path: Path) -> dict:
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    return {"anchors": data.get("anchors", {}), "redirects": data.get("redirects", {})}


def compare(registry: dict, current: dict[str, dict]) -> list[str]:
    """Differences between the committed registry and the book, as problems to fix."""
    problems = []
    redirects = registry["redirects"]
    for label, entry in registry["anchors"].items():
        if label not in current:
            problems.append(f"anchor {label!r} ({entry['doc']}) disappeared: restore it, or rename "
                            "it deliberately (registry entry + a redirect in conf/anchors.json)")
        elif current[label]["doc"] != entry["doc"]:
            problems.append(f"anchor {label!r} moved from {entry['doc']} to "
                            f"{current[label]['doc']}: update conf/anchors.json deliberately")
    for label, entry in current.items():
        if label not in registry["anchors"]:
            problems.append(f"anchor {label!r} ({entry['doc']}) is not in conf/anchors.json: "
                            "register it (python -m infralens_book anchors update)")
    for old, new in redirects.items():
        if old in current:
            problems.append(f"redirect from {old!r}, but that label still exists")
        if new not in current:
            problems.append(f"redirect {old!r} -> {new!r}, but {new!r} does not exist")
    return problems


def update_registry(path: Path, current: dict[str, dict]) -> None:
    registry = load_registry(path)
    data = {"anchors": dict(sorted(current.items())), "redirects": registry["redirects"]}
    tmp = path.with_suffix(".json.partial")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(path)


# --- HTML: stable URLs and the cite button ------------------------------------------------------

NO_PAGE = ("genindex", "search", "modindex", "py-modindex")  # Sphinx's own labels


SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def tex_as_text(tex: str) -> str:
    """Inline math as plain text for a citation: ``\\sqrt{d_h}`` -> ``√d_h``, ``O(s^2)`` -> ``O(s²)``."""
    tex = re.sub(r"\\sqrt\{([^{}]*)\}", "√\\1", tex)
    tex = re.sub(r"\^\{?(\d+)\}?", lambda m: m[1].translate(SUPERSCRIPTS), tex)
    tex = re.sub(r"_\{([^{}]*)\}", r"_\1", tex)
    return re.sub(r"\\[A-Za-z]+\s*", "", tex).replace("{", "").replace("}", "").strip()


def plain_title(title: nodes.Element) -> str:
    """A heading's text with its inline math written as plain text."""
    parts = []
    for node in title.findall(lambda n: isinstance(n, (nodes.Text, nodes.math))):
        if isinstance(node, nodes.math):
            parts.append(tex_as_text(node.astext()))
        elif not isinstance(node.parent, nodes.math):
            parts.append(node.astext())
    return "".join(parts)


def _citation(title: str, label: str) -> str:
    return f"“{title}”, InfraLens, §{label}"


def _cite_button(title: str, label: str) -> nodes.raw:
    return nodes.raw("", (f'<button class="infralens-cite" type="button" '
                          f'data-cite="{html.escape(_citation(title, label))}" '
                          f'data-href="a/{html.escape(label)}.html" '
                          f'title="Copy a citation of this section">cite</button>'), format="html")


def add_cite_buttons(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    """A cite button on every labelled section and on every glossary term."""
    if app.builder.format != "html":
        return
    labels = app.env.domaindata["std"]["labels"]
    for label, (doc, labelid, sectname) in labels.items():
        if doc != docname or not sectname or label in NO_PAGE:
            continue
        for section in doctree.findall(nodes.section):
            if labelid in section["ids"]:
                section.insert(1, _cite_button(plain_title(section[0]), label))
                break
    for term in doctree.findall(nodes.term):
        ids = [i for i in term["ids"] if i.startswith("term-")]
        if ids:
            term += _cite_button(term.astext(), ids[0])


def check_registry(app: Sphinx, exception: Exception | None) -> None:
    """Every build compares the book's anchors with the registry: a registered anchor that
    disappeared (or moved, or an unregistered one) is a warning, so `-W` fails the build."""
    if exception:
        return
    current, problems = collect(Path(app.srcdir))
    problems += compare(load_registry(Path(app.config.infralens_anchor_registry)), current)
    for problem in problems:
        logger.warning("anchors: %s", problem, type="infralens", subtype="anchors")


def write_stable_urls(app: Sphinx, exception: Exception | None) -> None:
    """`a/<label>.html` forwards to the label's current location (redirects included); a
    forwarder left from an earlier build whose label no longer exists is removed."""
    if exception or app.builder.format != "html" or app.builder.name == "singlehtml":
        return
    labels = app.env.domaindata["std"]["labels"]
    registry = load_registry(Path(app.config.infralens_anchor_registry))
    # label -> (doc, id, title): labelled sections of pages this build writes (not the labels a
    # domain registers for an index page the build leaves out), then glossary terms under their ids.
    places = {label: place for label, place in labels.items()
              if place[2] and label not in NO_PAGE and place[0] in app.env.all_docs}
    for (kind, name), (doc, termid) in app.env.domaindata["std"]["objects"].items():
        if kind == "term":
            places[termid] = (doc, termid, name)
    targets = {label: label for label in places}
    targets.update({old: new for old, new in registry["redirects"].items() if new in places})
    outdir = Path(app.outdir) / "a"
    outdir.mkdir(exist_ok=True)
    written = set()
    for label, target in targets.items():
        doc, labelid, title = places[target]
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", label):
            continue
        url = "../" + app.builder.get_target_uri(doc) + "#" + labelid
        written.add(f"{label}.html")
        (outdir / f"{label}.html").write_text(
            f'<!DOCTYPE html><html><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f'<meta http-equiv="refresh" content="0; url={html.escape(url)}">'
            f'<link rel="canonical" href="{html.escape(url)}"></head>'
            f'<body><a href="{html.escape(url)}">{html.escape(title)}</a></body></html>\n',
            encoding="utf-8")
    for stale in outdir.glob("*.html"):
        if stale.name not in written:
            stale.unlink()
