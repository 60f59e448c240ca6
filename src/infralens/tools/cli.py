"""Conventions shared by every ``python -m infralens.<module>`` command line.

Bad input (a wrong flag, a negative size, a malformed file) is the reader's to fix, not a crash to
debug: one line on stderr, ``<prog>: error: <reason>``, and exit status 2, never a traceback.
Parsers raise :class:`UsageError`; a command's ``main`` hands its work to :func:`run_main`, which
catches it with the command's own input errors and prints the line (:func:`one_line_error`).
:func:`write_json` writes a command's ``--out``. :func:`run_module` runs such a command line once
and prints it as a terminal would, so a page can show a good run and a bad one.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")


class UsageError(Exception):
    """A command-line mistake (bad or missing flag); reported in one line, exit status 2."""


class OneLineParser(argparse.ArgumentParser):
    """argparse prints its usage block before an error; we want the error line alone."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _integer(text: str, ok, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer > 0."""
    return _integer(text, lambda v: v > 0, "a positive integer")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _integer(text, lambda v: v >= 0, "a non-negative integer")


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
    ``run``'s errors are the program's: they propagate. Returns the exit status (``run``'s, or 0).
    """
    try:
        prepared = prepare(argv)
    except SystemExit as done:  # --help has printed its text: status 0
        return int(done.code or 0)
    except errors as err:  # bad input is the reader's to fix, not a crash to debug
        return one_line_error(prog, err)
    status = run(prepared) if run is not None else None
    return status or 0
# [/cli:errors]


def write_json(path: str, obj) -> None:
    """Write ``obj`` as JSON to ``path`` (a command's ``--out``) atomically: a temporary file next
    to it first, renamed into place when complete, so a reader never sees half a file."""
    tmp = f"{path}.partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


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
