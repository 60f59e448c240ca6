"""Annotated includes: pins alone choose the emphasized lines, so src cannot drift under them."""

import json

from infralens_book import annotated
from infralens_book.__main__ import annotation_problems

SOURCE = """def f(x):
    # [demo:region]
    y = x * 2
    z = y + 1
    return z
    # [/demo:region]
"""


def _opts(pins=("z = y + 1",)):
    return {"start-after": "# [demo:region]", "end-before": "# [/demo:region]",
            "pins": json.dumps(list(pins))}


def _src(tmp_path, text=SOURCE):
    src = tmp_path / "src" / "m.py"
    src.parent.mkdir(exist_ok=True)
    src.write_text(text)
    return src


def test_every_include_in_the_book_is_sound():
    assert annotation_problems() == []


def test_pins_choose_the_lines(tmp_path):
    assert annotated.check(_src(tmp_path), _opts(("return z", "y = x"))) == ([1, 3], [])


def test_a_pin_follows_its_line_when_lines_are_added_above_it(tmp_path):
    src = _src(tmp_path, SOURCE.replace("    y = x * 2\n", "    w = x\n    y = w * 2\n"))
    assert annotated.check(src, _opts()) == ([3], [])


def test_removing_a_pinned_line_fails(tmp_path):
    src = _src(tmp_path, SOURCE.replace("    z = y + 1\n", "    z = y\n"))
    lines, problems = annotated.check(src, _opts())
    assert lines == [] and len(problems) == 1 and "source moved" in problems[0]


def test_an_ambiguous_pin_fails_unless_it_is_listed_as_often_as_it_occurs(tmp_path):
    src = _src(tmp_path)
    _, problems = annotated.check(src, _opts(("y",)))
    assert len(problems) == 1 and "in 2 lines" in problems[0]
    assert annotated.check(src, _opts(("y", "y"))) == ([1, 2], [])


def test_removing_a_marker_fails(tmp_path):
    src = _src(tmp_path, SOURCE.replace("    # [/demo:region]\n", ""))
    assert any("occurs 0 times" in p for p in annotated.check(src, _opts())[1])


def test_src_regions_need_markers_and_no_line_numbers(tmp_path):
    src = _src(tmp_path)
    assert annotated.check(src, {"lines": "3-4"})[1]
    numbered = {**_opts(), "emphasize-lines": "2"}
    assert any("alone" in p for p in annotated.check(src, numbered)[1])


def test_pins_must_be_a_list_of_strings(tmp_path):
    src = _src(tmp_path)
    assert annotated.check(src, {**_opts(), "pins": '"z = y"'})[1]
    assert annotated.check(src, {**_opts(), "pins": "[1]"})[1]


def test_a_pin_with_a_comment_is_refused(tmp_path):
    # MyST reads " #..." in a directive option as a comment, so such a pin never reaches the check.
    problems = annotated.check(_src(tmp_path), {**_opts(), "pins": '["z = y + 1  # the sum"]'})[1]
    assert any("' #'" in p for p in problems)
