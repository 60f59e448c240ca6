"""Real text that ships with Python: the standard library's own source, read as bytes.

A model trained on it learns something checkable (Python code has structure a byte-level model can
pick up in minutes) and nothing is downloaded. Tokens are bytes (a vocabulary of 256), so there is
no tokenizer to ship either.

The files are the ``.py`` files under the running interpreter's standard library directory
(``sysconfig.get_path("stdlib")``), without installed packages (``site-packages``) or the test
suites, in sorted order. A file goes to the held-out split when a hash of its relative path says
so, so the split does not move when files are added elsewhere, and no held-out file was seen in
training. Different Python versions ship different files: the corpus is a property of the
interpreter, and :func:`stdlib_corpus` says which one it read.
"""

from __future__ import annotations

import hashlib
import platform
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import torch

from infralens.tools.checks import require_positive

__all__ = ["TextCorpus", "stdlib_corpus", "stdlib_files", "BYTE_VOCAB"]

#: A byte-level vocabulary: every token is one byte of the UTF-8 source.
BYTE_VOCAB = 256
_SKIP = ("site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__")


@dataclass(frozen=True)
class TextCorpus:
    """Training and held-out token streams (int64 byte values) and where they came from."""

    train: torch.Tensor
    held_out: torch.Tensor
    python: str
    files: int
    held_out_files: int


def stdlib_files(root: str | Path | None = None) -> list[Path]:
    """The standard library's ``.py`` files under ``root`` (default: this interpreter's), sorted by
    their path relative to it, without installed packages and test suites."""
    base = Path(root or sysconfig.get_path("stdlib"))
    files = [p for p in base.rglob("*.py") if not set(p.relative_to(base).parts[:-1]) & set(_SKIP)]
    return sorted(files, key=lambda p: p.relative_to(base).as_posix())


def _held_out(relative: str, every: int) -> bool:
    digest = hashlib.sha256(relative.encode()).digest()
    return int.from_bytes(digest[:4], "little") % every == 0


# [text:corpus]
def stdlib_corpus(train_bytes: int, held_out_bytes: int, held_out_every: int = 10,
                  root: str | Path | None = None) -> TextCorpus:
    """The first ``train_bytes`` bytes of the training files and the first ``held_out_bytes`` of
    the held-out files (one file in about ``held_out_every``, chosen by a hash of its path)."""
    require_positive(train_bytes=train_bytes, held_out_bytes=held_out_bytes,
                     held_out_every=held_out_every)
    base = Path(root or sysconfig.get_path("stdlib"))
    parts: dict[bool, list[bytes]] = {False: [], True: []}
    want = {False: train_bytes, True: held_out_bytes}
    have = {False: 0, True: 0}
    counted = {False: 0, True: 0}
    for path in stdlib_files(base):
        side = _held_out(path.relative_to(base).as_posix(), held_out_every)
        if have[side] >= want[side]:
            if all(have[s] >= want[s] for s in (False, True)):
                break
            continue
        data = path.read_bytes()
        parts[side].append(data)
        have[side] += len(data)
        counted[side] += 1
    for side, name in ((False, "training"), (True, "held-out")):
        if have[side] < want[side]:
            raise ValueError(f"the standard library at {base} has only {have[side]:,} bytes of "
                             f"{name} files; asked for {want[side]:,}")

    def tokens(side: bool) -> torch.Tensor:
        data = b"".join(parts[side])[: want[side]]
        return torch.frombuffer(bytearray(data), dtype=torch.uint8).long()
    return TextCorpus(tokens(False), tokens(True), platform.python_version(),
                      counted[False], counted[True])
# [/text:corpus]
