"""Execute the book's GPU cells on a CUDA machine and write one record per cell.

Cells of one page run in order in one namespace (like a notebook), separately from the CPU cells:
a GPU cell imports what it needs. What a cell leaves in a variable named ``results`` (a JSON-able
dict), what it prints and the matplotlib figures it leaves open become its record.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import time
import traceback
import zlib
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from infralens.tools.cli import shown, whole_file

from . import provenance, records
from .parse import CodeCell, gpu_cells


class _Tee(io.TextIOBase):
    """Print a cell's output live and keep a copy for the record."""

    def __init__(self, *streams):
        self.streams = streams

    def write(self, s: str) -> int:
        for stream in self.streams:
            stream.write(s)
        return len(s)

    def flush(self) -> None:
        for stream in self.streams:
            stream.flush()


def _figures() -> dict[str, dict[str, bytes]]:
    """Every open matplotlib figure as SVG (web), PDF (print) and PNG; then close them."""
    if "matplotlib.pyplot" not in sys.modules:
        return {}
    import matplotlib.pyplot as plt

    out = {}
    for n, num in enumerate(plt.get_fignums(), start=1):
        fig = plt.figure(num)
        formats = {}
        for ext, meta in (("svg", {"Date": None}), ("pdf", {"CreationDate": None}), ("png", {})):
            buf = io.BytesIO()
            fig.savefig(buf, format=ext, bbox_inches="tight", metadata=meta, dpi=150)
            formats[ext] = buf.getvalue()
        out[f"fig-{n}"] = formats
    plt.close("all")
    return out


def run_cells(cells: Iterable[CodeCell], book: Path) -> tuple[list[Path], list[str]]:
    """Run `cells` page by page; return (record folders written, failure messages)."""
    os.environ.setdefault("MPLBACKEND", "Agg")
    written, failures = [], []
    prov = provenance.collect(records.ROOT)
    namespaces: dict[str, dict] = {}
    for cell in cells:
        where = f"{cell.page}.md:{cell.line}"
        if not cell.record:
            failures.append(f"{where}: a gpu cell needs ':record: <id>'")
            continue
        ns = namespaces.setdefault(cell.page, {"__name__": f"gpu_cell_{cell.page}"})
        ns.pop("results", None)
        captured = io.StringIO()
        print(f"== {cell.record} ({where})", flush=True)
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(_Tee(sys.stdout, captured)):
                exec(compile(cell.source, where, "exec"), ns)  # noqa: S102 - the book's own cells
            results = ns.get("results", {})
            json.dumps(results, allow_nan=False)
        except Exception:  # report, write nothing for this cell, go on with the others
            traceback.print_exc()
            _figures()
            failures.append(f"{where}: cell {cell.record} failed (no record written)")
            continue
        seconds = time.perf_counter() - start
        folder = records.write(cell.record, cell.page, cell.source, prov, results,
                               captured.getvalue(), _figures(), seconds, book)
        print(f"   wrote {folder.relative_to(book.parent)} in {seconds:.1f} s", flush=True)
        written.append(folder)
    return written, failures


def pack(folders: list[Path], book: Path, archive: Path) -> None:
    """One .tar.gz of the record folders, paths relative to book/_records (for `unpack`)."""
    base = records.records_dir(book)
    archive.parent.mkdir(parents=True, exist_ok=True)
    with whole_file(archive) as tmp, tarfile.open(tmp, "w:gz") as tar:
        for folder in folders:
            tar.add(folder, arcname=folder.relative_to(base).as_posix())


class ArchiveError(ValueError):
    """A records archive that `unpack` refuses; the message names the archive and what is wrong."""


#: What reading a damaged archive raises: truncated or corrupt gzip, a broken tar.
_READ_ERRORS = (OSError, EOFError, zlib.error, tarfile.TarError)


def check_archive(archive: Path) -> list[str]:
    """Read the whole archive and check it as `unpack` needs it; return its runs, ``record/run``.

    The gzip stream must be whole (a truncated download fails here, not halfway through an
    extraction); every member must be a plain folder or file at ``<record>/<run>/<file>``; every
    run must hold a ``record.json`` that :func:`records.parse_record` accepts, for the record its
    folder names, with the figures it lists. Raises :class:`ArchiveError`.
    """
    try:
        with gzip.open(archive) as stream:  # every byte, so the gzip trailer's checksum is read too
            while stream.read(1 << 20):
                pass
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            runs: dict[str, dict[str, bytes | None]] = {}
            seen: set[str] = set()
            for m in members:
                parts = PurePosixPath(m.name).parts
                where = f"{archive}: unexpected member {shown(m.name)}"
                if m.name in seen:
                    raise ArchiveError(f"{where} (twice in the archive)")
                seen.add(m.name)
                if (m.name.startswith("/") or not 1 <= len(parts) <= 3
                        or not records.RECORD_ID.match(parts[0])
                        or not all(records.PLAIN_NAME.match(p) for p in parts[1:])):
                    raise ArchiveError(f"{where} (expected <record>/<run>/<file>)")
                if not (m.isdir() or (m.isreg() and len(parts) == 3)):
                    raise ArchiveError(f"{where} (not a plain folder, or a file of a run)")
                if len(parts) == 3:
                    files = runs.setdefault("/".join(parts[:2]), {})
                    files[parts[2]] = (tar.extractfile(m).read() if parts[2] == "record.json"
                                       else None)
    except ArchiveError:
        raise
    except _READ_ERRORS as err:
        raise ArchiveError(f"{archive}: not a readable .tar.gz ({type(err).__name__}: {err})") from None
    if not runs:
        raise ArchiveError(f"{archive}: holds no records")
    for run, files in sorted(runs.items()):
        if "record.json" not in files:
            raise ArchiveError(f"{archive}: {run} has no record.json")
        try:
            data = records.parse_record(files["record.json"], f"{archive}: {run}/record.json")
        except records.RecordError as err:
            raise ArchiveError(str(err)) from None
        record = run.split("/")[0]
        if data["record"] != record:
            raise ArchiveError(f"{archive}: {run}/record.json is a record of {data['record']!r}")
        for stem in data.get("figures", []):
            if not any(name.startswith(f"{stem}.") for name in files):
                raise ArchiveError(f"{archive}: {run} lists figure {stem!r} but holds no file of it")
    return sorted(runs)


def unpack(archive: Path, book: Path) -> list[str]:
    """Extract an archive made by `pack` into book/_records; return its runs, ``record/run``.

    Nothing is written unless the whole archive passes :func:`check_archive` and the records
    already there can be indexed. The runs are extracted into a temporary folder beside the
    records and each is renamed into place whole (replacing a run of the same name); then
    ``index.json`` is rewritten, atomically.
    """
    runs = check_archive(archive)
    base = records.records_dir(book)
    records.index_entries(book)  # a malformed record already here: fail before writing anything
    base.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=base))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(tmp, filter="data")
        for run in runs:
            new, final = tmp / run, base / run
            final.parent.mkdir(exist_ok=True)
            if final.exists():  # the same run unpacked again: swap it whole
                old = tmp / ".replaced" / run
                old.parent.mkdir(parents=True, exist_ok=True)
                final.rename(old)
            new.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    records.update_index(book)
    return runs


def select(book: Path, page: str | None, record: str | list[str] | None) -> list[CodeCell]:
    """The GPU cells of pages whose path contains ``page``, with one of the ``record`` ids."""
    cells = gpu_cells(book)
    if page:
        cells = [c for c in cells if page in c.page]
    if record:
        wanted = {record} if isinstance(record, str) else set(record)
        cells = [c for c in cells if c.record in wanted]
    return cells
