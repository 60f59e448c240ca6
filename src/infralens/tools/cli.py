"""Conventions shared by every ``python -m infralens.<module>`` command line.

Bad input (a wrong flag, a negative size, a malformed file) is the reader's to fix, not a crash to
debug: one line on stderr, ``<prog>: error: <reason>``, and exit status 2, never a traceback.
Parsers raise :class:`UsageError`; a command's ``main`` hands its work to :func:`run_main`, which
catches it with the command's own input errors and prints the line (:func:`one_line_error`), and
ends quietly when the reader of stdout goes away (``| head``). Input is checked before work starts:
sizes have a ceiling (:func:`positive_int`), a file a command will write is checked when its flag
is parsed (:func:`output_path`), and it is written whole or not at all (:func:`whole_file`,
:func:`write_json`). :func:`run_module` runs such a command line once and prints it as a terminal
would, so a page can show a good run and a bad one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")

#: The largest size a command line takes: what a signed 64-bit integer holds (torch, ctypes and
#: CUDA count elements and bytes in one). A 400-digit "size" is a typo, not a request.
MAX_INT = 2**63 - 1
#: Exit status of a command whose reader closed stdout early (``| head``): 128 + SIGPIPE, what a
#: shell reports for a program that a closed pipe stopped.
CLOSED_PIPE_STATUS = 128 + 13


class UsageError(Exception):
    """A command-line mistake (bad or missing flag); reported in one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its usage block before an error; we want the error line alone."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def shown(text: str, limit: int = 40) -> str:
    """``text`` quoted for an error line, shortened when it is longer than ``limit`` characters."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit // 2]!r}... ({len(text):,} characters)"


def _integer(text: str, ok, what: str) -> int:
    try:
        value = int(text)
    except ValueError:  # also a number of more digits than int() reads
        raise argparse.ArgumentTypeError(f"expected {what}, got {shown(text)}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    if value > MAX_INT:
        digits = len(str(value))
        raise argparse.ArgumentTypeError(
            f"expected {what} of at most 2**63 - 1, got " + (f"a {digits}-digit number" if digits > 30
                                                               else f"{value}"))
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0 (and at most :data:`MAX_INT`)."""
    return _integer(text, lambda v: v > 0, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (and at most :data:`MAX_INT`)."""
    return _integer(text, lambda v: v >= 0, "a non-negative integer")


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (``inf`` and ``nan`` are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {shown(text)}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {shown(text)}")
    return value


def output_path(text: str) -> str:
    """argparse type: a file the command will write (``--out``, ``--save``), checked before any work.

    Its folder must exist and be writable, and the path must not be a folder itself, so a long
    run does not fail at its end for want of a place to put its result.
    """
    if not text:
        raise argparse.ArgumentTypeError("expected a file path, got ''")
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text} is a folder: give a file path inside it")
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"cannot write {text}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: folder {folder} is not writable")
    return text


# [cli:errors]
def one_line_error(prog: str, err: BaseException) -> int:
    """Print ``<prog>: error: <reason>`` (the reason folded onto one line) to stderr; return 2."""
    print(f"{prog}: error: {' '.join(str(err).split())}", file=sys.stderr)
    return 2


def run_main(prog: str, argv: Sequence[str] | None, prepare: Callable[[Sequence[str] | None], T],
             run: Callable[[T], int | None] | None = None, *,
             errors: tuple[type[Exception], ...] = (UsageError, ValueError)) -> int:
    """A command line's ``main``: ``prepare`` the reader's input, then ``run`` with what it returned.

    ``prepare(argv)`` parses and checks the input, and does whatever else may fail because of it
    (for a command that prints a report: the report). One of ``errors`` raised there is bad input:
    one line on stderr and exit status 2. argparse's own exit passes through (``--help``: 0).
    ``run``'s errors are the program's: they propagate. Returns the exit status (``run``'s, or 0);
    a reader that closed stdout early (``| head``) ends the command quietly (:func:`closed_pipe`).
    """
    try:
        try:
            prepared = prepare(argv)
        except SystemExit as done:  # --help has printed its text: status 0
            status = int(done.code or 0)
        except errors as err:  # bad input is the reader's to fix, not a crash to debug
            return one_line_error(prog, err)
        else:
            status = run(prepared) if run is not None else None
        sys.stdout.flush()  # a reader that went away shows here, not as a traceback at exit
    except BrokenPipeError:  # `... | head`: the reader has all it wanted
        return closed_pipe()
    return status or 0
# [/cli:errors]


def closed_pipe() -> int:
    """The reader of stdout closed it (``| head``): stop quietly, as a program stopped by SIGPIPE
    does. What is still buffered goes to /dev/null, so exiting prints no second error."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: a stdout with no file descriptor
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return CLOSED_PIPE_STATUS


@contextlib.contextmanager
def whole_file(path: str | os.PathLike) -> Iterator[str]:
    """A temporary name next to ``path`` to write to, renamed to ``path`` when the block completes
    (removed when it fails), so a reader finds the old file or the whole new one, never half."""
    final = os.fspath(path)
    head, name = os.path.split(final)
    tmp = os.path.join(head, f".{name}.{os.getpid()}.partial")
    try:
        yield tmp
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def read_yaml(path: str | os.PathLike, error: type[Exception], what: str):
    """The parsed contents of the YAML file ``path``; a file that cannot be read or parsed raises
    ``error`` with one line naming it (``what``: "plan file", "cluster file")."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise error(f"cannot read {what} '{path}': {reason}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" (line {where.line + 1})" if where is not None else ""
        raise error(f"{what} '{path}' is not valid YAML{line}") from None


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as JSON to ``path`` (a command's ``--out``), whole (:func:`whole_file`)."""
    with whole_file(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)


def run_module(module: str, args: Sequence[str] = (), *, env: Mapping[str, str] | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``python -m MODULE ARGS`` once and print it as a terminal would.

    Prints the command, what the process wrote to stdout and then stderr, and ``[exit status N]``.
    A non-zero status is returned, not raised: a page runs bad input on purpose to show the one
    error line. ``env`` replaces the environment (default: this process's own).
    """
    done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                          env=None if env is None else dict(env), timeout=timeout)
    print("$ " + shlex.join(["python", "-m", module, *args]))
    print(done.stdout + done.stderr, end="")
    print(f"[exit status {done.returncode}]")
    return done
