"""The command-line conventions: one error line, exit status 2, and a run shown as a terminal would."""

import argparse
import json
import shlex
import subprocess
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


def test_run_module_inherits_this_environment_and_shows_a_success(tmp_path, capsys, monkeypatch):
    (tmp_path / "env_mod.py").write_text(
        "import os, sys\nprint(os.environ['INFRALENS_TEST_MARK'], sys.executable)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("INFRALENS_TEST_MARK", "inherited")
    done = cli.run_module("env_mod", timeout=60)  # no env: the child gets this process's
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"inherited {sys.executable}\n"  # the same interpreter
    assert capsys.readouterr().out == f"$ python -m env_mod\ninherited {sys.executable}\n[exit status 0]\n"


def test_run_module_replaces_the_environment_when_given_one(tmp_path, capsys, monkeypatch):
    (tmp_path / "env_mod2.py").write_text("import os\nprint(os.environ.get('INFRALENS_TEST_MARK'))\n")
    monkeypatch.setenv("INFRALENS_TEST_MARK", "not passed on")
    done = cli.run_module("env_mod2", env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert (done.returncode, done.stdout) == (0, "None\n")
    capsys.readouterr()


def test_run_module_gives_up_after_its_timeout(tmp_path, capsys):
    (tmp_path / "slow_mod.py").write_text("import time\ntime.sleep(30)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        cli.run_module("slow_mod", env={"PYTHONPATH": str(tmp_path)}, timeout=1)
    assert capsys.readouterr().out == ""  # nothing printed for a run that did not finish


def test_a_cli_of_this_package_gives_one_line_and_status_2_through_run_module(capsys):
    # The project's rule for bad input, end to end: one line on stderr, exit status 2.
    done = cli.run_module("infralens.memory", ["--model", "no-such-model"], timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("infralens.memory: error: ")  # <prog>: error: <reason>
    assert capsys.readouterr().out.splitlines()[-1] == "[exit status 2]"


# --- run_main: the one main of every command line, and --out files -------------------------------

def _demo_parser():
    parser = cli.OneLineParser(prog="demo")
    parser.add_argument("--n", type=cli.positive_int, required=True)
    return parser


def test_run_main_runs_what_prepare_returned(capsys):
    ran = []
    assert cli.run_main("demo", ["--n", "3"], lambda a: _demo_parser().parse_args(a).n, ran.append) == 0
    assert ran == [3]
    assert cli.run_main("demo", ["--n", "3"], lambda a: None, lambda _: 5) == 5  # run's own status
    assert cli.run_main("demo", [], lambda a: None) == 0  # nothing to run
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, words", [([], "--n"), (["--n", "0"], "positive"), (["--n", "7"], "odd")])
def test_run_main_turns_bad_input_into_one_line_and_status_2(argv, words, capsys):
    def prepare(a):
        n = _demo_parser().parse_args(a).n
        if n % 2:
            raise ValueError(f"an odd n:\n{n}")  # folded onto one line
        return n

    ran = []
    assert cli.run_main("demo", argv, prepare, ran.append) == 2
    err = capsys.readouterr().err
    assert not ran and err.startswith("demo: error: ") and words in err and err.count("\n") == 1


def test_run_main_passes_help_through_and_leaves_run_errors_alone(capsys):
    assert cli.run_main("demo", ["--help"], lambda a: _demo_parser().parse_args(a)) == 0
    assert "--n" in capsys.readouterr().out

    def fails(_):
        raise ValueError("a bug, not bad input")

    with pytest.raises(ValueError, match="a bug"):  # the program's errors keep their traceback
        cli.run_main("demo", ["--n", "2"], lambda a: None, fails)
    with pytest.raises(KeyError):  # an error that is not among `errors`
        cli.run_main("demo", [], lambda a: {}["missing"])
    assert cli.run_main("demo", [], lambda a: {}["missing"], errors=(KeyError,)) == 2


def test_write_json_replaces_the_file_whole(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    cli.write_json(str(out), {"a": [1, 2]})
    assert json.loads(out.read_text()) == {"a": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no .partial left behind
