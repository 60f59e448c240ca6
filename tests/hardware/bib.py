"""The BibTeX keys of conf/bib, read with a regular expression (shared by the hardware tests)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIB_DIR = ROOT / "conf" / "bib"
HARDWARE_BIB = BIB_DIR / "hardware.bib"
_ENTRY = re.compile(r"^\s*@\s*(\w+)\s*\{\s*([^,\s]+)\s*,", re.MULTILINE)


def bib_keys(path: Path) -> list[str]:
    return [key for kind, key in _ENTRY.findall(path.read_text(encoding="utf-8"))
            if kind.lower() not in {"comment", "preamble", "string"}]


def all_bib_keys() -> list[str]:
    return [k for p in sorted(BIB_DIR.glob("*.bib")) for k in bib_keys(p)]
