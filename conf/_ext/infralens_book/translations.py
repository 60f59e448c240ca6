"""The Chinese edition: which pages are translated, their catalogs, and the checks on them.

The book is written in English; a translation lives in gettext catalogs, one ``.po`` file per
translated page under ``conf/locales/<lang>/LC_MESSAGES/``. Sphinx's ``gettext`` builder extracts
one message per paragraph, heading, table cell and list item; :func:`update` merges fresh
extractions into the catalogs the way ``msgmerge`` does: a message whose English is unchanged keeps
its translation, a message whose English changed keeps its old translation marked *fuzzy* (Sphinx
shows the English for fuzzy entries until a translator confirms them), and a new message starts
untranslated. :func:`problems` reports what would make a translated page fall back to English, and
translations that lost a role, a math span, a code span or a link of their English.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: Languages with an edition, and the pages each one translates (docnames, without ".md").
TRANSLATED = {
    "zh_CN": (
        "index",
        "front/welcome",
        "front/how-to-use",
        "front/reading-paths",
        "front/hardware-reference",
        "back/glossary",
        "labs/lab01-memory-accounting",
        "interview/memory-accounting",
    ),
}

ROOT = Path(__file__).resolve().parents[3]
LOCALES = ROOT / "conf" / "locales"

# What a translation must carry over unchanged: roles ({ref}`x`, {glue:text}`k`, {term}`t`, {cite:p}`k`),
# inline math ($...$), code spans (`...`) and link targets ((...) after [..]).
_ROLE = re.compile(r"(?<!`)\{[a-z:\-]+\}`[^`]+`")  # not a role written as code: `{term}`
_MATH = re.compile(r"(?<!\\)\$[^$]+\$")
_LINK = re.compile(r"\]\(([^)]+)\)")
# Sphinx parses each translation as Markdown: one that starts like a list item becomes a list, which
# does not fit where a paragraph was, so the English is shown instead.
_LIST_START = re.compile(r"^(?:[-+*]|\d+[.)])\s")


def _code_spans(text: str) -> list[str]:
    without_roles = _ROLE.sub("", text)
    return re.findall(r"``[^`]+``|`[^`]+`", without_roles)


def _role_targets(text: str) -> list[str]:
    out = []
    for role in _ROLE.findall(text):
        m = re.match(r"(\{[a-z:\-]+\})`(?:[^`<]*<([^>]+)>|([^`]+))`", role)
        out.append(f"{m.group(1)}{m.group(2) or m.group(3)}")
    return sorted(out)


def _kept(text: str) -> list[str]:
    """What a translation must keep: role targets (a role's text may be translated), inline math,
    code spans and link targets, sorted."""
    rest = _ROLE.sub("", text)
    return sorted(_role_targets(text) + _MATH.findall(rest) + _code_spans(text) + _LINK.findall(text))


def catalog_path(lang: str, docname: str, locales: Path = LOCALES) -> Path:
    return locales / lang / "LC_MESSAGES" / f"{docname}.po"


def extract(pot_dir: Path, book: Path = ROOT / "book", conf: Path = ROOT / "conf") -> None:
    """Run Sphinx's gettext builder (no notebook execution: messages come from the prose)."""
    cmd = [sys.executable, "-m", "sphinx", "-b", "gettext", "-q", "-c", str(conf),
           "-D", "nb_execution_mode=off", str(book), str(pot_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"gettext extraction failed:\n{done.stderr[-2000:]}")


def update(pot_dir: Path, lang: str, docnames: tuple[str, ...], locales: Path = LOCALES) -> list[Path]:
    """Merge ``pot_dir/<doc>.pot`` into each page's catalog (created when missing)."""
    from babel.messages.pofile import read_po, write_po

    written = []
    for doc in docnames:
        pot = pot_dir / f"{doc}.pot"
        if not pot.is_file():
            raise FileNotFoundError(f"no template for {doc}: {pot}")
        with pot.open("rb") as f:
            template = read_po(f)
        target = catalog_path(lang, doc, locales)
        if target.is_file():
            with target.open("rb") as f:
                catalog = read_po(f, locale=lang)
            catalog.update(template, no_fuzzy_matching=False, update_header_comment=False)
            catalog.obsolete.clear()  # no stale translations kept around as comments
        else:
            catalog = read_po(pot.open("rb"), locale=lang)
            catalog.locale = lang
        catalog.fuzzy = False  # the header: Sphinx must read its charset
        for message in catalog:  # prose, not Python format strings, whatever a % or {} suggests
            message.flags -= {"python-format", "python-brace-format"}
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=target.parent, delete=False, suffix=".tmp") as tmp:
            write_po(tmp, catalog, width=0, omit_header=False, include_previous=True)
        Path(tmp.name).replace(target)  # whole or not at all
        written.append(target)
    return written


def problems(lang: str, docnames: tuple[str, ...], locales: Path = LOCALES,
             pot_dir: Path | None = None) -> list[str]:
    """Untranslated and fuzzy entries, translations that drop or change markup, and (given fresh
    templates) English messages the catalog does not hold yet."""
    from babel.messages.pofile import read_po

    found = []
    for doc in docnames:
        path = catalog_path(lang, doc, locales)
        if not path.is_file():
            found.append(f"{doc}: no catalog at {path.relative_to(locales.parent)}")
            continue
        with path.open("rb") as f:
            catalog = read_po(f, locale=lang)
        for message in catalog:
            if not message.id:
                continue
            where = f"{doc}.po: {str(message.id)[:60]!r}"
            if message.fuzzy:
                found.append(f"{where}: fuzzy (the English changed; confirm or fix the translation)")
            elif not message.string:
                found.append(f"{where}: not translated")
            elif _kept(message.id) != _kept(message.string):
                found.append(f"{where}: the translation changes roles, math, code or links")
            elif _LIST_START.match(message.string):
                found.append(f"{where}: a translation that starts with a list marker is parsed as a list "
                             "and dropped; start it with a word")
        if pot_dir is not None:
            with (pot_dir / f"{doc}.pot").open("rb") as f:
                template = read_po(f)
            missing = {m.id for m in template if m.id} - {m.id for m in catalog if m.id}
            found += [f"{doc}.po: {str(m)[:60]!r}: not in the catalog (run the update)"
                      for m in sorted(missing)]
    return found


# --- glued numbers inside translated paragraphs ----------------------------------------------------
# Sphinx parses each translated paragraph as a small document of its own, after the page's
# notebook has been parsed and its execution client closed, so myst-nb cannot look a
# {glue:text} key up there. A key written without a page is made a reference to the page being
# translated (myst-nb's `page::key` form), which myst-nb resolves after parsing from the glue data
# it saved for that page: the same numbers in every edition.


def install(app) -> None:
    from pathlib import PurePosixPath

    from docutils import nodes
    from myst_nb.ext.glue import roles
    from sphinx.transforms import SphinxTransform

    class LocateNestedText(SphinxTransform):
        """Text parsed inside a directive (a table in a dropdown) can arrive without a source
        location, and Sphinx neither extracts nor translates text it cannot locate: give such
        nodes the location of their nearest located ancestor."""

        default_priority = 5  # before sphinx.transforms.i18n.Locale (20)

        def apply(self) -> None:
            for node in self.document.findall(nodes.TextElement):
                if node.source:
                    continue
                parent = node.parent
                while parent is not None and not getattr(parent, "source", None):
                    parent = parent.parent
                if parent is not None and not isinstance(parent, nodes.document):
                    node.source, node.line = parent.source, parent.line

    app.add_transform(LocateNestedText)

    original = roles.PasteTextRole.run
    if getattr(original, "_infralens", False):
        return

    def run(self):
        document = self.document
        if "nb_renderer" not in document and "::" not in self.text and hasattr(document.settings, "env"):
            env = document.settings.env
            spec = "" if ":" in self.text else ":s"  # myst-nb splits a format spec off the last ':'
            self.text = f"{PurePosixPath(str(env.doc2path(env.docname))).name}::{self.text}{spec}"
        return original(self)

    run._infralens = True
    roles.PasteTextRole.run = run
