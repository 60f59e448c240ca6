"""Execute the book's GPU cells on a CUDA machine and write one record per cell.

Cells of one page run in order in one namespace (like a notebook), separately from the CPU cells:
a GPU cell imports what it needs. What a cell leaves in a variable named ``results`` (a JSON-able
dict), what it prints and the matplotlib figures it leaves open become its record.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tarfile
import time
import traceback
from collections.abc import Iterable
from pathlib import Path

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
    tmp = archive.with_name(archive.name + ".partial")
    with tarfile.open(tmp, "w:gz") as tar:
        for folder in folders:
            tar.add(folder, arcname=folder.relative_to(base).as_posix())
    tmp.replace(archive)


def unpack(archive: Path, book: Path) -> list[str]:
    """Extract an archive made by `pack` into book/_records; reject anything but plain record files."""
    base = records.records_dir(book)
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        for m in members:
            parts = Path(m.name).parts
            if (m.name.startswith("/") or ".." in parts or len(parts) > 3
                    or not (m.isfile() or m.isdir()) or not records.RECORD_ID.match(parts[0])):
                raise ValueError(f"{archive}: unexpected member {m.name!r}")
        tar.extractall(base, members=members, filter="data")
    records.update_index(book)
    return sorted({"/".join(Path(m.name).parts[:2]) for m in members if m.isfile()})


def select(book: Path, page: str | None, record: str | list[str] | None) -> list[CodeCell]:
    """The GPU cells of pages whose path contains ``page``, with one of the ``record`` ids."""
    cells = gpu_cells(book)
    if page:
        cells = [c for c in cells if page in c.page]
    if record:
        wanted = {record} if isinstance(record, str) else set(record)
        cells = [c for c in cells if c.record in wanted]
    return cells
