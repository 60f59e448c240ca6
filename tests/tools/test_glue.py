"""Glue, tables and records as a page uses them, checked through myst-nb's and markdown-it's own code.

A glued string reaches the page the way myst-nb's ``{glue:text}`` role reads it: the text/plain
form of the display data that ``myst_nb.glue`` publishes, passed through
``myst_nb.core.variables.format_plain_text``. Tables are parsed back with markdown-it (the parser
MyST is built on), records are written in their on-disk format by hand.
"""

from __future__ import annotations

import inspect
import json
import random
from pathlib import Path

import pytest

from infralens.tools import glue


@pytest.fixture()
def published(monkeypatch):
    """What myst_nb.glue hands to IPython's display, by key (the kernel is not needed)."""
    import myst_nb.ext.glue as myst_glue

    out: dict[str, tuple[dict, dict]] = {}

    def display(bundle, raw, metadata):
        assert raw
        out[metadata["scrapbook"]["name"]] = (bundle, metadata)

    monkeypatch.setattr(myst_glue, "ipy_display", display)
    return out


def as_the_page_reads_it(published: dict, key: str) -> str:
    """The text {glue:text}`key` puts on the page."""
    from myst_nb.core.variables import format_plain_text
    from myst_nb.ext.glue import GLUE_PREFIX

    bundle, metadata = published[key]
    assert metadata["scrapbook"]["mime_prefix"] == GLUE_PREFIX  # display=False: nothing shown
    return format_plain_text(bundle[GLUE_PREFIX + "text/plain"], "")


TRICKY = [
    "", "plain", "It's", '"quoted"', "It's \"both\"", "'", '"', "'''", '"""', "back\\slash", "\\",
    "ends with a backslash \\", "line\nbreak", "tab\there", "unicode: Ψ, ×, —, ≤, 🙂",
    "{cite:p}`dao2022flashattention`", "a | pipe", "1e3", "[1, 2]", "None", "0x1F",
    "a long sentence " * 20, "\x00 and \x7f", "r'raw'", "\r\n",
]


@pytest.mark.parametrize("text", TRICKY)
def test_glue_text_round_trips_through_myst_nb(text, published):
    glue.glue_text("value", text)
    assert as_the_page_reads_it(published, "value") == text


def test_glue_text_round_trips_random_strings(published):
    rng = random.Random(20261121)
    alphabet = "ab '\"\\\n\t{}`|%$#Ψ—🙂\x00\x1b" + "0123456789."
    for n in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 120)))
        glue.g(f"k{n}", text)
        assert as_the_page_reads_it(published, f"k{n}") == text


@pytest.mark.parametrize("value, shown", [(132, "132"), (3.35e12, "3350000000000.0"), (1.5, "1.5"),
                                          (None, "None"), (True, "True")])
def test_non_strings_are_glued_as_their_str(value, shown, published):
    glue.glue_text("v", value)
    assert as_the_page_reads_it(published, "v") == shown == str(value)


@pytest.mark.parametrize("key", ["", "1st", "has-dash", "has space", "dot.ted", "ünï"])
def test_bad_keys_are_refused(key, published):
    with pytest.raises(ValueError, match="use letters, digits and underscores"):
        glue.glue_text(key, "x")
    assert published == {}


def test_g_is_glue_text():
    assert glue.g is glue.glue_text


def test_glue_figure_glues_the_figure_and_closes_it(published):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    glue.glue_figure("fig_demo", fig)
    bundle, _ = published["fig_demo"]  # (outside a kernel IPython has no PNG formatter registered)
    assert bundle["application/papermill.record/text/plain"].startswith("<Figure size")
    assert fig.number not in plt.get_fignums()
    with pytest.raises(ValueError):
        glue.glue_figure("bad key", plt.figure())
    plt.close("all")


# --- tables ----------------------------------------------------------------------------------------

def parse_table(markdown: str) -> list[list[str]]:
    """Header and body rows as markdown-it parses them (the text of each cell)."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    assert tokens[0].type == "table_open", markdown
    rows, row = [], None
    for i, tok in enumerate(tokens):
        if tok.type == "tr_open":
            row = []
        elif tok.type in ("th_open", "td_open"):
            row.append(tokens[i + 1].content if tokens[i + 1].type == "inline" else "")
        elif tok.type == "tr_close":
            rows.append(row)
    return rows


def test_markdown_table_parses_back_cell_for_cell():
    header = ["GPU", "HBM", "note"]
    rows = [("H100", 80, "{cite:p}`nvidiah100`"), ["A100", 80.0, ""], ("B200", None, "x")]
    md = glue.markdown_table(header, rows)
    lines = md.splitlines()
    assert len(lines) == 2 + len(rows) and lines[1] == "|---|---|---|"
    assert parse_table(md) == [header, ["H100", "80", "{cite:p}`nvidiah100`"], ["A100", "80.0", ""],
                               ["B200", "None", "x"]]


def test_a_pipe_in_a_cell_is_escaped_not_a_new_column():
    md = glue.markdown_table(["a", "b|c"], [["x | y", "|"]])
    assert parse_table(md) == [["a", "b|c"], ["x | y", "|"]]


def test_rows_may_be_any_iterable_and_a_header_alone_is_a_table():
    assert parse_table(glue.markdown_table(("h",), (iter([i]) for i in range(3)))) == [
        ["h"], ["0"], ["1"], ["2"]]
    assert parse_table(glue.markdown_table(["only", "header"], [])) == [["only", "header"]]


@pytest.mark.parametrize("row", [["1"], ["1", "2", "3"], []])
def test_a_row_of_the_wrong_length_is_an_error(row):
    with pytest.raises(ValueError, match=f"a row has {len(row)} cells, the header 2"):
        glue.markdown_table(["a", "b"], [["ok", "ok"], row])


def test_md_table_displays_the_same_markdown():
    shown = glue.md_table(["a"], [[1]])
    assert type(shown).__name__ == "Markdown" and shown.data == glue.markdown_table(["a"], [[1]])


# --- records -----------------------------------------------------------------------------------

def write_run(book, record_id: str, folder: str, date: str, results: dict) -> None:
    """One run in the on-disk format of infralens.tools.cells.records, written by hand."""
    run = book / "_records" / record_id / folder
    run.mkdir(parents=True)
    (run / "record.json").write_text(json.dumps({
        "record": record_id, "page": "labs/demo", "cell_sha256": "0" * 64,
        "provenance": {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04",
                       "cuda": "13.0", "torch": "2.11.0", "triton": "3.6.0", "date": date},
        "results": results, "stdout": "", "figures": [], "seconds": 1.0}))


def test_missing_record_names_the_id_and_how_to_make_it(tmp_path):
    with pytest.raises(glue.MissingRecord, match="'ch01-roofline' does not exist") as info:
        glue.record("ch01-roofline", tmp_path / "book")
    assert "python -m infralens.tools.cells run --record ch01-roofline" in str(info.value)
    assert "\n" not in str(info.value)
    assert issubclass(glue.MissingRecord, LookupError)


def test_record_returns_the_newest_run(tmp_path):
    book = tmp_path / "book"
    # folder names sort the other way round: the date decides
    write_run(book, "demo-cell", "b-run", "2026-01-05T10:00:00Z", {"gbps": 1.0})
    write_run(book, "demo-cell", "a-run", "2026-03-01T10:00:00Z", {"gbps": 2.0})
    (book / "_records" / "demo-cell" / ".partial-xyz").mkdir()  # an unfinished write: ignored
    rec = glue.record("demo-cell", book)
    assert rec.results == {"gbps": 2.0} and rec.path.name == "a-run"
    with pytest.raises(glue.MissingRecord, match="other-cell"):
        glue.record("other-cell", book)


def test_record_reads_the_book_of_the_environment(tmp_path, monkeypatch):
    book = tmp_path / "elsewhere"
    write_run(book, "env-cell", "run", "2026-01-01T00:00:00Z", {"x": 1})
    monkeypatch.setenv("INFRALENS_BOOK", str(book))
    assert glue.record("env-cell").results == {"x": 1}


# --- repo_relative -------------------------------------------------------------------------------

def test_repo_relative_strips_this_checkout():
    root = Path(__file__).resolve().parents[2]  # tests/tools/test_glue.py -> the checkout
    assert (root / "pyproject.toml").is_file()
    assert glue.repo_relative(inspect.getsourcefile(glue)) == "src/infralens/tools/glue.py"
    line = f"CPU: registered at {root}/src/a.cpp:36 [kernel]; see {root}/src/b.py"
    assert glue.repo_relative(line) == "CPU: registered at src/a.cpp:36 [kernel]; see src/b.py"


@pytest.mark.parametrize("text", ["", "no path here", "/__w/pytorch/pytorch/aten/src/ATen/core/x.cpp:3",
                                  "torch/_meta_registrations.py:54"])
def test_repo_relative_leaves_other_text_alone(text):
    assert glue.repo_relative(text) == text


def test_repo_relative_needs_the_whole_folder_name():
    root = str(Path(__file__).resolve().parents[2])
    sibling = f"{root}-other/src/x.py"  # a folder whose name starts like the checkout's
    assert glue.repo_relative(sibling) == sibling
    assert glue.repo_relative(root) == root  # the folder itself, with no slash after it
