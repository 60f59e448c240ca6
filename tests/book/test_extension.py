"""The book's extension on a small Sphinx project: what fails a build, and for how long.

Each test builds a two-page project with the book's own extension (no notebook execution), so a
build takes seconds: a moved pinned line fails every rebuild until it is fixed, a registered
anchor that disappears fails the build, and a forwarder whose label is gone is removed.
"""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CONF = """
import sys
sys.path.insert(0, {ext!r})
extensions = ["myst_nb", "infralens_book"]
exclude_patterns = ["_build"]
html_theme = "basic"
infralens_anchor_registry = {registry!r}
"""
SOURCE = """def f(x):
    # [demo:region]
    y = x * 2
    z = y + 1
    return z
    # [/demo:region]
"""
INDEX = """(home)=
# Home

```{{toctree}}
page
```
"""
PAGE = """(page)=
# Page

(page-code)=
## Code

```{{literalinclude}} /src/m.py
:language: python
:start-after: "# [demo:region]"
:end-before: "# [/demo:region]"
:pins: ["z = y + 1"]
```
"""


def _project(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    (book / "src").mkdir(parents=True)
    (book / "src" / "m.py").write_text(SOURCE)
    (book / "index.md").write_text(INDEX.format())
    (book / "page.md").write_text(PAGE.format())
    registry = tmp_path / "anchors.json"
    anchors = {"home": {"doc": "index", "title": "Home"}, "page": {"doc": "page", "title": "Page"},
               "page-code": {"doc": "page", "title": "Code"}}
    registry.write_text(json.dumps({"anchors": anchors, "redirects": {}}))
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "conf.py").write_text(
        CONF.format(ext=str(ROOT / "conf" / "_ext"), registry=str(registry)))
    return book


def _build(book: Path) -> subprocess.CompletedProcess:
    """An incremental build into one output folder, as `nox -s html` does."""
    out = book.parent / "_build"
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
         "-c", str(book.parent / "conf"), str(book), str(out)],
        capture_output=True, text=True, cwd=book.parent)


def test_the_small_project_builds_and_emphasizes_the_pinned_line(tmp_path):
    book = _project(tmp_path)
    done = _build(book)
    assert done.returncode == 0, done.stderr
    html = (book.parent / "_build" / "page.html").read_text()
    assert '<span class="hll">' in html  # the pinned line is highlighted


def test_a_removed_pinned_line_fails_every_rebuild_until_fixed(tmp_path):
    book = _project(tmp_path)
    assert _build(book).returncode == 0
    (book / "src" / "m.py").write_text(SOURCE.replace("z = y + 1", "z = y"))
    for _ in range(2):  # the first rebuild after the edit, and a plain rebuild after that
        done = _build(book)
        assert done.returncode != 0 and "source moved" in done.stderr
    (book / "src" / "m.py").write_text(SOURCE)
    assert _build(book).returncode == 0


def test_a_registered_anchor_that_disappears_fails_the_build(tmp_path):
    book = _project(tmp_path)
    assert _build(book).returncode == 0
    assert (book.parent / "_build" / "a" / "page-code.html").is_file()
    (book / "page.md").write_text(PAGE.format().replace("(page-code)=\n## Code\n", ""))
    for _ in range(2):
        done = _build(book)
        assert done.returncode != 0 and "'page-code'" in done.stderr and "disappeared" in done.stderr


def test_a_forwarder_whose_label_is_gone_is_removed(tmp_path):
    book = _project(tmp_path)
    assert _build(book).returncode == 0
    (book / "page.md").write_text(PAGE.format().replace("(page-code)=\n## Code\n", "(page-code)=\n"))
    registry = json.loads((tmp_path / "anchors.json").read_text())
    del registry["anchors"]["page-code"]
    (tmp_path / "anchors.json").write_text(json.dumps(registry))
    (book / "page.md").write_text(PAGE.format().replace("(page-code)=\n## Code\n", ""))
    done = _build(book)
    assert done.returncode == 0, done.stderr
    assert not (book.parent / "_build" / "a" / "page-code.html").exists()
    assert (book.parent / "_build" / "a" / "page.html").is_file()


TABLE = """
```{{table}} {caption}
:name: {name}

| a | b |
|---|---|
| 1 | 2 |
```
"""


def test_tables_and_figures_are_numbered_within_their_page(tmp_path):
    book = _project(tmp_path)
    (book.parent / "conf" / "conf.py").write_text(
        (book.parent / "conf" / "conf.py").read_text() + "numfig = True\n")
    (book / "index.md").write_text(INDEX.format().replace("page\n", "page\nother\n"))
    (book / "page.md").write_text(PAGE.format() + TABLE.format(caption="First", name="t-first"))
    (book / "other.md").write_text("(other)=\n# Other\n" + TABLE.format(caption="Second", name="t-second")
                                   + TABLE.format(caption="Third", name="t-third"))
    registry = json.loads((tmp_path / "anchors.json").read_text())
    registry["anchors"]["other"] = {"doc": "other", "title": "Other"}
    (tmp_path / "anchors.json").write_text(json.dumps(registry))
    assert _build(book).returncode == 0
    other = (book.parent / "_build" / "other.html").read_text()
    # Book-wide numbering would make these Table 2 and Table 3.
    assert "Table 1 </span>" in other and "Table 2 </span>" in other and "Table 3" not in other
    page = book.parent / "_build" / "page.html"
    written = page.stat().st_mtime_ns
    assert _build(book).returncode == 0  # a rebuild with nothing changed rewrites no page
    assert page.stat().st_mtime_ns == written
