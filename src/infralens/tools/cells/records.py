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


class RecordError(ValueError):
    """A ``record.json`` that cannot be read as a record; the message names the file."""


#: Keys of ``provenance`` that :func:`provenance.line` prints, each a string or a number.
PROVENANCE_KEYS = ("gpu", "sm_count", "driver", "cuda", "torch", "triton", "date")
#: A run folder or a figure stem: what :func:`write` makes (never a hidden or a partial one).
PLAIN_NAME = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]*$")


def parse_record(text: str | bytes, where: str) -> dict:
    """The fields of one ``record.json`` as :func:`write` makes them, checked; ``where`` names
    the file in the :class:`RecordError` that anything else raises."""
    try:
        data = json.loads(text)
    except (UnicodeDecodeError, ValueError) as err:
        raise RecordError(f"{where}: not a JSON record ({err})") from None

    def bad(what: str) -> RecordError:
        return RecordError(f"{where}: malformed record: {what}")

    if not isinstance(data, dict):
        raise bad(f"a JSON {type(data).__name__}, not an object")
    kinds = {"record": str, "page": str, "cell_sha256": str, "provenance": dict, "results": dict}
    for key, kind in kinds.items():
        if key not in data:
            raise bad(f"no {key!r}")
        if not isinstance(data[key], kind):
            raise bad(f"{key!r} is a {type(data[key]).__name__}, not a {kind.__name__}")
    if not RECORD_ID.match(data["record"]):
        raise bad(f"record id {data['record']!r}")
    prov = data["provenance"]
    for key in PROVENANCE_KEYS:
        if not isinstance(prov.get(key), str | int | float) or isinstance(prov.get(key), bool):
            raise bad(f"provenance {key!r} is missing or not a string or number")
    if not isinstance(prov["date"], str) or not isinstance(prov.get("commit", ""), str):
        raise bad("provenance 'date' and 'commit' must be strings")
    if not isinstance(data.get("stdout", ""), str):
        raise bad("'stdout' is not a string")
    figures = data.get("figures", [])
    if not isinstance(figures, list) or not all(isinstance(f, str) and PLAIN_NAME.match(f)
                                                for f in figures):
        raise bad("'figures' must be a list of plain file stems")
    seconds = data.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise bad("'seconds' is not a number")
    return data


def _load(folder: Path) -> Record:
    path = folder / "record.json"
    try:
        text = path.read_bytes()
    except OSError as err:
        raise RecordError(f"{path}: cannot read ({err.strerror or err})") from None
    data = parse_record(text, str(path))
    if data["record"] != folder.parent.name:
        raise RecordError(f"{path}: malformed record: it says record {data['record']!r}, "
                          f"its folder {folder.parent.name!r}")
    return Record(
        record=data["record"], path=folder, page=data["page"], cell_sha256=data["cell_sha256"],
        provenance=data["provenance"], results=data["results"], stdout=data.get("stdout", ""),
        figures=list(data.get("figures", [])), seconds=float(data.get("seconds", 0.0)),
    )


def runs(record: str, book: Path | None = None) -> list[Record]:
    """Every complete run of `record`, oldest first (a folder without record.json is ignored, and
    so is a hidden one: a run still being written). A malformed record raises :class:`RecordError`."""
    folder = records_dir(book) / record
    if not folder.is_dir():
        return []
    found = [_load(d) for d in folder.iterdir()
             if not d.name.startswith(".") and (d / "record.json").is_file()]
    return sorted(found, key=lambda r: (r.provenance.get("date", ""), r.path.name))


def latest(record: str, book: Path | None = None) -> Record | None:
    """The newest run of `record`, or None when the cell has never been measured."""
    found = runs(record, book)
    return found[-1] if found else None


def index_path(book: Path | None = None) -> Path:
    return records_dir(book) / "index.json"


def index_entries(book: Path | None = None) -> dict[str, dict]:
    """What ``_records/index.json`` holds: the latest run of every record (:class:`RecordError`
    for a malformed one, naming its file)."""
    base = records_dir(book)
    entries = {}
    if not base.is_dir():
        return entries
    for folder in sorted(d for d in base.iterdir() if d.is_dir() and not d.name.startswith(".")):
        rec = latest(folder.name, book)
        if rec is not None:
            entries[folder.name] = {"run": rec.path.name, "provenance": rec.provenance_line}
    return entries


def update_index(book: Path | None = None) -> Path:
    """Rewrite ``_records/index.json``: the latest run of every record.

    The CPU build watches this one file, so a new run (written here or unpacked from a GPU
    machine) makes Sphinx re-read the pages that show or quote records.
    """
    base = records_dir(book)
    base.mkdir(parents=True, exist_ok=True)
    latest_runs = index_entries(book)
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
