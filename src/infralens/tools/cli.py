"""Conventions shared by every ``python -m infralens.<module>`` command line.

Bad input (a wrong flag, a negative size, a malformed file) is the reader's to fix, not a crash to
debug: one line on stderr, ``<prog>: error: <reason>``, and exit status 2, never a traceback.
Parsers raise :class:`UsageError`; each ``main`` catches it with its own input errors and prints
the line.
"""

from __future__ import annotations

import argparse


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
