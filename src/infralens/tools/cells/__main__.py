"""python -m infralens.tools.cells {check-cuda,list,run,unpack}: the GPU-cell runner (see runner.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from infralens.tools.cli import OneLineParser, UsageError, output_path, run_main

from . import records

PROG = "infralens.tools.cells"


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


def build_parser() -> OneLineParser:
    parser = OneLineParser(prog=f"python -m {PROG}", description=__doc__,
                           epilog=f"Bad input prints one line, '{PROG}: error: <reason>', and exits 2.")
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
    run.add_argument("--archive", type=output_path,
                     help="also pack the new records into this .tar.gz")
    unpack = sub.add_parser("unpack", help="extract a records archive into the book")
    unpack.add_argument("archive", type=Path)
    return parser


def _prepare(argv: Sequence[str] | None) -> Callable[[], int | None]:
    """Parse and check everything the command needs; return the work that is left (for ``list``,
    only printing)."""
    args = build_parser().parse_args(argv)

    from . import runner  # after argument parsing: `--help` works anywhere

    book = args.book.resolve()
    if not book.is_dir():
        raise UsageError(f"book folder not found: {book}")
    if args.command == "check-cuda":
        problem = cuda_problem()
        if problem:
            raise UsageError(problem)
        return lambda: 0
    if args.command == "list":
        lines = []
        for cell in runner.select(book, None, None):
            rec = records.latest(cell.record, book) if cell.record else None  # RecordError: one line
            state = "not measured yet" if rec is None else rec.provenance_line
            stale = "" if rec is None or rec.is_current(cell.source) else "  [cell changed since]"
            lines.append(f"{cell.record}\t{cell.page}.md:{cell.line}\t{state}{stale}")
        return lambda: print(*lines, sep="\n") if lines else None
    if args.command == "unpack":
        if args.archive.is_dir():
            raise UsageError(f"{args.archive} is a folder, not a records archive (.tar.gz)")
        if not args.archive.is_file():
            raise UsageError(f"archive not found: {args.archive}")
        runner.check_archive(args.archive)  # the whole archive, before anything is written
        records.index_entries(book)  # and the records already here

        def unpack() -> None:
            for name in runner.unpack(args.archive, book):
                print(f"unpacked {name}")
        return unpack

    problem = cuda_problem()
    if problem:
        raise UsageError(problem)
    cells = runner.select(book, args.page, args.record)
    if args.stale:
        cells = [c for c in cells if not (rec := records.latest(c.record, book) if c.record else None)
                 or not rec.is_current(c.source)]
    if not cells:
        raise UsageError("no GPU cells match")
    return lambda: _run(cells, book, args.archive)


def _run(cells, book: Path, archive: str | None) -> int:
    from . import runner

    written, failures = runner.run_cells(cells, book)
    if archive and written:
        runner.pack(written, book, Path(archive))
        print(f"packed {len(written)} record(s) into {archive}")
    for failure in failures:
        print(f"{PROG}: {failure}", file=sys.stderr)
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, lambda work: work())


if __name__ == "__main__":
    sys.exit(main())
