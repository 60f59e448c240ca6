"""python -m infralens.kernels {report,ncu-driver}: build and report the book's CUDA kernels.

``report NAME`` compiles ``NAME.cu`` (or reuses the cache) and prints ptxas's report;
``ncu-driver NAME`` launches every kernel of it once, for Nsight Compute to watch
(:func:`infralens.kernels.library.run_ncu` runs it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from infralens.kernels.library import SOURCES, CudaError, build, torch_module
from infralens.tools.cli import OneLineParser, UsageError, positive_int, run_main
from infralens.tools.nvcc import ARCHS, BuildError


def _ncu_driver(args: argparse.Namespace) -> None:
    """Launch every kernel of one library once, on fresh random data, for a profiler to watch."""
    from infralens.kernels.reduce import REDUCE_RUNGS, ReduceKernels
    from infralens.kernels.transpose import TRANSPOSE_KERNELS, TransposeKernels

    torch = torch_module()
    gen = torch.Generator(device="cuda").manual_seed(0)
    if args.source == "reduce":
        kernels = ReduceKernels()
        x = torch.randn(args.n, generator=gen, device="cuda")
        for rung in REDUCE_RUNGS:
            kernels.sum(x, rung)
        kernels.bind_copy(x, torch.empty_like(x))()
    else:
        kernels = TransposeKernels()
        x = torch.randn(args.rows, args.cols, generator=gen, device="cuda")
        for kernel in TRANSPOSE_KERNELS:
            kernels.transpose(x, kernel)
    torch.cuda.synchronize()


def _report(args: argparse.Namespace) -> None:
    result = build(args.source)
    where = "cache" if result.cached else f"nvcc, {result.seconds:.1f} s"
    print(f"{result.source.name}: {result.nvcc_version} ({where})")
    print(f"{'kernel':<32}{'regs':>6}{'smem B':>8}{'barriers':>9}{'stack B':>8}{'spills B':>9}")
    for r in result.resources_for(args.arch):
        print(f"{r.kernel:<32}{r.registers:>6}{r.shared_bytes:>8}{r.barriers:>9}{r.stack_bytes:>8}"
              f"{r.spill_store_bytes + r.spill_load_bytes:>9}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m infralens.kernels",
                            description="Build and report the book's CUDA kernels.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="compile (or reuse the cache) and print ptxas's report")
    rep.add_argument("source", choices=sorted(SOURCES))
    rep.add_argument("--arch", default="sm_90", choices=ARCHS)
    drv = sub.add_parser("ncu-driver", help="launch every kernel once (run under ncu)")
    drv.add_argument("source", choices=sorted(SOURCES))
    drv.add_argument("--n", type=positive_int, default=(1 << 24) + 3, help="elements (reduce)")
    drv.add_argument("--rows", type=positive_int, default=4096 + 7, help="rows (transpose)")
    drv.add_argument("--cols", type=positive_int, default=4096 + 5, help="columns (transpose)")
    # The whole command is prepared: a build or a launch fails on the reader's input too.
    return run_main(parser.prog, argv, lambda a: _command(parser.parse_args(a)),
                    errors=(UsageError, BuildError, CudaError, ValueError))


def _command(args: argparse.Namespace) -> None:
    if args.command == "report":
        _report(args)
    else:
        _check_driver(args)
        _ncu_driver(args)


def _check_driver(args: argparse.Namespace) -> None:
    """What ``ncu-driver`` needs before it builds or launches anything: a GPU, sizes the kernels
    index and the GPU's free memory holds (the input and one output of as many float32s)."""
    torch = torch_module()
    if not torch.cuda.is_available():
        raise UsageError(f"no CUDA GPU visible to PyTorch {torch.__version__}: ncu-driver launches "
                         "the kernels on one (run it on a machine with an NVIDIA GPU)")
    if args.source == "reduce":
        elements = args.n
    else:
        if max(args.rows, args.cols) >= 2**31:
            raise UsageError(f"--rows {args.rows} --cols {args.cols}: the transpose kernels index "
                             "rows and columns with a 32-bit int (at most 2**31 - 1)")
        elements = args.rows * args.cols
    needed, free = 2 * 4 * elements, torch.cuda.mem_get_info()[0]
    if needed > free:
        raise UsageError(f"{elements:,} float32 elements, in and out, need {needed / 2**30:,.1f} GiB; "
                         f"the GPU has {free / 2**30:,.1f} GiB free")


if __name__ == "__main__":
    sys.exit(main())
