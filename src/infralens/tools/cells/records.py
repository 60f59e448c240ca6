"""GPU records on disk: ``book/_records/<record>/<stamp>/record.json`` plus its figures.

A record is written once, complete, by the GPU runner and never edited. Several runs of the same
cell keep their own folders; the book shows the latest. Records are the only source of GPU numbers
in the book's prose: a CPU cell calls :func:`latest` and glues what it needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import provenance

ROOT = Path(__file__).resolve().parents[4]
RECORD_ID = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def book_dir() -> Path:
    return Path(os.environ.get("INFRALENS_BOOK", ROOT / "book"))


def records_dir(book: Path | None = None) -> Path:
    return (book or book_dir()) / "_records"


def cell_digest(source: str) -> str:
    return hashlib.sha256(source.strip().encode()).hexdigest()


@dataclass(frozen=True)
class Record:
    record: str
    path: Path              # the folder of this run
    page: str
    cell_sha256: str
    provenance: dict
    results: dict
    stdout: str
    figures: list[str]      # figure stems in `path` (each saved as .svg, .pdf and .png)
    seconds: float

    @property
    def provenance_line(self) -> str:
        return provenance.line(self.provenance)

    def is_current(self, source: str) -> bool:
        """Whether the record was made by the cell source as it is now."""
        return self.cell_sha256 == cell_digest(source)


def _load(folder: Path) -> Record:
    data = json.loads((folder / "record.json").read_text(encoding="utf-8"))
    return Record(
        record=data["record"], path=folder, page=data["page"], cell_sha256=data["cell_sha256"],
        provenance=data["provenance"], results=data["results"], stdout=data.get("stdout", ""),
        figures=list(data.get("figures", [])), seconds=float(data.get("seconds", 0.0)),
    )


def runs(record: str, book: Path | None = None) -> list[Record]:
    """Every complete run of `record`, oldest first (a folder without record.json is ignored)."""
    folder = records_dir(book) / record
    if not folder.is_dir():
        return []
    found = [_load(d) for d in folder.iterdir() if (d / "record.json").is_file()]
    return sorted(found, key=lambda r: (r.provenance.get("date", ""), r.path.name))


def latest(record: str, book: Path | None = None) -> Record | None:
    """The newest run of `record`, or None when the cell has never been measured."""
    found = runs(record, book)
    return found[-1] if found else None


def index_path(book: Path | None = None) -> Path:
    return records_dir(book) / "index.json"


def update_index(book: Path | None = None) -> Path:
    """Rewrite ``_records/index.json``: the latest run of every record.

    The CPU build watches this one file, so a new run (written here or unpacked from a GPU
    machine) makes Sphinx re-read the pages that show or quote records.
    """
    base = records_dir(book)
    base.mkdir(parents=True, exist_ok=True)
    latest_runs = {}
    for folder in sorted(d for d in base.iterdir() if d.is_dir()):
        rec = latest(folder.name, book)
        if rec is not None:
            latest_runs[folder.name] = {"run": rec.path.name, "provenance": rec.provenance_line}
    path = index_path(book)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(latest_runs, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def write(record: str, page: str, source: str, prov: dict, results: dict, stdout: str,
          figures: dict[str, dict[str, bytes]], seconds: float, book: Path | None = None) -> Path:
    """Write one run atomically: into a temporary folder first, renamed into place when complete."""
    if not RECORD_ID.match(record):
        raise ValueError(f"record id {record!r}: use lowercase letters, digits and hyphens")
    payload = json.dumps({
        "record": record, "page": page, "cell_sha256": cell_digest(source), "provenance": prov,
        "results": results, "stdout": stdout, "figures": sorted(figures), "seconds": seconds,
    }, indent=2, sort_keys=True, allow_nan=False)
    stamp = prov["date"].replace("-", "").replace(":", "")
    gpu = re.sub(r"[^a-z0-9]+", "-", prov["gpu"].lower()).strip("-")
    parent = records_dir(book) / record
    parent.mkdir(parents=True, exist_ok=True)
    final = parent / f"{stamp}-{gpu}"
    tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=parent))
    try:
        (tmp / "record.json").write_text(payload + "\n", encoding="utf-8")
        for stem, formats in figures.items():
            for ext, blob in formats.items():
                (tmp / f"{stem}.{ext}").write_bytes(blob)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    update_index(book)
    return final
