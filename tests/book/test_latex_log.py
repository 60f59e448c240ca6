"""The PDF's LaTeX log check: what it reports, on logs written the way TeX writes them (lines
broken at 79 characters)."""

import textwrap

from infralens_book import latex_log
from infralens_book.anchors import tex_as_text


def _tex_wrap(text: str) -> str:
    """Break every line after 79 characters, as TeX does in its log (max_print_line)."""
    out = []
    for line in text.splitlines():
        while len(line) > 79:
            out.append(line[:79])
            line = line[79:]
        out.append(line)
    return "\n".join(out) + "\n"


LOG = ("LaTeX Warning: Hyper reference `handbook/ch01-gpu-architecture:ch01-ex-coalescing' on page 54 "
       "undefined on input line 6817.\n") + """\
LaTeX Warning: Citation `dao2022flashattention' on page 12 undefined on input line 900.
LaTeX Warning: Reference `sec:short' on page 3 undefined on input line 10.
Overfull \\hbox (10.00214pt too wide) in paragraph at lines 16729--16729
Overfull \\hbox (4.9pt too wide) in paragraph at lines 20--20
Overfull \\hbox (72.4pt too wide) detected at line 22907
Missing character: There is no ⁂ in font FreeSerif:mode=node;script=latn;language=dflt;!
"""


def test_undefined_references_survive_tex_line_breaks(tmp_path):
    (tmp_path / "book.log").write_text(_tex_wrap(LOG))
    assert latex_log.undefined_references(tmp_path) == [
        "dao2022flashattention (page 12)",
        "handbook/ch01-gpu-architecture:ch01-ex-coalescing (page 54)",
        "sec:short (page 3)",
    ]


def test_overfull_boxes_over_the_tolerance_widest_first(tmp_path):
    (tmp_path / "book.log").write_text(_tex_wrap(LOG))
    assert latex_log.overfull_boxes(tmp_path) == [
        "72.4 pt too wide at line 22907 of book.tex",
        "10.00214 pt too wide at line 16729 of book.tex",
    ]
    assert len(latex_log.overfull_boxes(tmp_path, tolerance_pt=1.0)) == 3


def test_missing_characters(tmp_path):
    (tmp_path / "book.log").write_text(_tex_wrap(LOG))
    assert [m.split(" (")[0] for m in latex_log.missing_characters(tmp_path)] == ["⁂"]


def test_a_clean_log_reports_nothing(tmp_path):
    (tmp_path / "book.log").write_text(textwrap.dedent("""\
        Output written on book.pdf (260 pages).
        Underfull \\hbox (badness 10000) in paragraph at lines 1--2
        """))
    assert (latex_log.undefined_references(tmp_path), latex_log.overfull_boxes(tmp_path),
            latex_log.missing_characters(tmp_path)) == ([], [], [])


def test_inline_math_in_a_heading_cites_as_plain_text():
    assert tex_as_text(r"\sqrt{d_h}") == "√d_h"
    assert tex_as_text("O(s^2)") == "O(s²)"
    assert tex_as_text(r"x^{10}_{i}") == "x¹⁰_i"
    assert tex_as_text(r"\mathrm{softmax}") == "softmax"
