"""python -m infralens.tools.cells {check-cuda,list,run,unpack}: the GPU-cell runner (see runner.py)."""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

from . import records

PROG = "infralens.tools.cells"


def _fail(message: str) -> int:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    return 2


def cuda_problem() -> str | None:
    """Why this machine cannot run GPU cells, or None when it can."""
    try:
        import torch
    except ImportError:
        return "PyTorch is not installed in this Python; GPU cells need a CUDA build of PyTorch"
    if not torch.cuda.is_available():
        return (f"no CUDA GPU visible to PyTorch {torch.__version__}: "
                "GPU cells run only on a machine with an NVIDIA GPU and a CUDA build of PyTorch")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {PROG}", description=__doc__)
    parser.add_argument("--book", type=Path, default=records.book_dir(), help="the book folder")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check-cuda", help="exit 0 when PyTorch sees a CUDA GPU")
    sub.add_parser("list", help="every GPU cell and its latest record")
    run = sub.add_parser("run", help="execute GPU cells and write their records")
    run.add_argument("--page", help="only pages whose path contains this text")
    run.add_argument("--record", action="append", default=[],
                     help="only the cell with this record id (repeat for several)")
    run.add_argument("--stale", action="store_true",
                     help="only cells with no record or whose code changed since their record")
    run.add_argument("--archive", type=Path, help="also pack the new records into this .tar.gz")
    unpack = sub.add_parser("unpack", help="extract a records archive into the book")
    unpack.add_argument("archive", type=Path)
    args = parser.parse_args(argv)

    from . import runner  # after argument parsing: `--help` works anywhere

    book = args.book.resolve()
    if not book.is_dir():
        return _fail(f"book folder not found: {book}")
    if args.command == "check-cuda":
        problem = cuda_problem()
        return _fail(problem) if problem else 0
    if args.command == "list":
        for cell in runner.select(book, None, None):
            rec = records.latest(cell.record, book) if cell.record else None
            state = "not measured yet" if rec is None else rec.provenance_line
            stale = "" if rec is None or rec.is_current(cell.source) else "  [cell changed since]"
            print(f"{cell.record}\t{cell.page}.md:{cell.line}\t{state}{stale}")
        return 0
    if args.command == "unpack":
        if not args.archive.is_file():
            return _fail(f"archive not found: {args.archive}")
        try:
            for name in runner.unpack(args.archive, book):
                print(f"unpacked {name}")
        except (ValueError, OSError, tarfile.TarError) as err:
            return _fail(f"{args.archive}: {err}")
        return 0

    problem = cuda_problem()
    if problem:
        return _fail(problem)
    cells = runner.select(book, args.page, args.record)
    if args.stale:
        cells = [c for c in cells if not (rec := records.latest(c.record, book) if c.record else None)
                 or not rec.is_current(c.source)]
    if not cells:
        return _fail("no GPU cells match")
    written, failures = runner.run_cells(cells, book)
    if args.archive and written:
        runner.pack(written, book, args.archive)
        print(f"packed {len(written)} record(s) into {args.archive}")
    for failure in failures:
        print(f"{PROG}: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
