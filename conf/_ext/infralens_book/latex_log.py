"""Read the LaTeX log of the PDF build for what a reader would find broken in print: glyphs that
silently vanished, references and citations left undefined ("??"), and lines that run into the
margin (overfull boxes wider than a tolerance)."""

from __future__ import annotations

import re
from pathlib import Path

MISSING = re.compile(r"Missing character: There is no (.+?) in font (\S+?)!")
UNDEFINED = re.compile(r"(?:LaTeX|pdfTeX) Warning: (?:Hyper r|R)eference `([^']+)' on page (\d+) undefined"
                       r"|LaTeX Warning: Citation `([^']+)' on page (\d+) undefined")
OVERFULL = re.compile(r"Overfull \\hbox \((\d+(?:\.\d+)?)pt too wide\) "
                      r"(?:in paragraph|detected) at lines? (\d+)")
TOLERANCE_PT = 5.0


def _logs(latex_dir: Path):
    """(name, text) of each log, with the lines TeX broke at 79 characters joined again."""
    for log in sorted(latex_dir.glob("*.log")):
        text = log.read_text(encoding="utf-8", errors="replace")
        yield log.name, re.sub(r"(?m)^(.{79})\n", r"\1", text)


def missing_characters(latex_dir: Path) -> list[str]:
    found = set()
    for name, text in _logs(latex_dir):
        for char, font in MISSING.findall(text):
            found.add(f"{char} (font {font}, {name})")
    return sorted(found)


def undefined_references(latex_dir: Path) -> list[str]:
    found = set()
    for _, text in _logs(latex_dir):
        for ref, page, cite, cite_page in UNDEFINED.findall(text):
            found.add(f"{ref or cite} (page {page or cite_page})")
    return sorted(found)


def overfull_boxes(latex_dir: Path, tolerance_pt: float = TOLERANCE_PT) -> list[str]:
    found = set()
    for name, text in _logs(latex_dir):
        for width, line in OVERFULL.findall(text):
            if float(width) > tolerance_pt:
                tex = name.replace(".log", ".tex")
                found.add((float(width), f"{width} pt too wide at line {line} of {tex}"))
    return [text for _, text in sorted(found, reverse=True)]
