"""The command-line conventions: one error line, exit status 2, and a run shown as a terminal would."""

import argparse
import shlex
import sys

import pytest

from infralens.tools import cli


@pytest.mark.parametrize("text, value", [("1", 1), ("42", 42), (" 7 ", 7), ("+3", 3)])
def test_positive_int_accepts_what_int_accepts(text, value):
    assert cli.positive_int(text) == int(text) == value


@pytest.mark.parametrize("text, message", [("0", "got 0"), ("-2", "got -2"), ("2k", "got '2k'"),
                                           ("1.5", "got '1.5'"), ("", "got ''")])
def test_positive_int_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=f"expected a positive integer, {message}$"):
        cli.positive_int(text)


def test_non_negative_int():
    assert cli.non_negative_int("0") == 0 and cli.non_negative_int("5") == 5
    with pytest.raises(argparse.ArgumentTypeError, match="expected a non-negative integer, got -1"):
        cli.non_negative_int("-1")


def test_parser_errors_become_usage_errors_without_the_usage_block(capsys):
    parser = cli.OneLineParser(prog="demo")
    parser.add_argument("--n", type=cli.positive_int, required=True)
    assert parser.parse_args(["--n", "3"]).n == 3
    for argv, words in ((["--n", "0"], "expected a positive integer, got 0"),
                        ([], "the following arguments are required: --n"),
                        (["--n", "1", "--m"], "unrecognized arguments: --m")):
        with pytest.raises(cli.UsageError, match=words):
            parser.parse_args(argv)
    assert capsys.readouterr() == ("", "")  # argparse printed nothing


def test_one_line_error_folds_the_reason(capsys):
    assert cli.one_line_error("demo", ValueError("bad\n  input:\tthree   words")) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "demo: error: bad input: three words\n"


def test_run_module_of_a_missing_module_is_a_status_not_an_exception(capsys):
    done = cli.run_module("this_module_does_not_exist_anywhere", timeout=60)
    assert done.args[:3] == [sys.executable, "-m", "this_module_does_not_exist_anywhere"]
    out = capsys.readouterr().out
    assert done.returncode == 1 and "No module named this_module_does_not_exist_anywhere" in out
    assert out.splitlines()[0] == "$ python -m this_module_does_not_exist_anywhere"
    assert out.splitlines()[-1] == "[exit status 1]"


def test_run_module_shows_stdout_then_stderr_and_returns_a_failure(tmp_path, capsys):
    (tmp_path / "demo_mod.py").write_text(
        "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
    done = cli.run_module("demo_mod", ["--flag", "a b"], env=env, timeout=60)
    assert done.returncode == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["$ " + shlex.join(["python", "-m", "demo_mod", "--flag", "a b"]),
                     "to stdout", "to stderr", "[exit status 3]"]
