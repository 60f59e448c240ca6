"""Read bandwidth against working-set size: the L2 measured, since NVIDIA publishes no figure.

:func:`measure_read_bandwidth` reads a buffer of a given size over and over with
:func:`infralens.kernels.triton_copy.repeat_read_kernel` (``.cg`` loads, cached in L2 only) until
a fixed number of bytes has been read, and times it with the book's harness. The harness flushes
the L2 before every timed call, so the first pass over the buffer always comes from HBM; every
later pass comes from wherever the buffer then lives. A buffer that fits in the L2 is therefore
read at (nearly) L2 speed, one far larger than the L2 at HBM speed, and the sweep of
:func:`sweep` shows where one turns into the other. Bytes read over time is a lower bound on the
rate of the level that serves the repeats: the first pass is in the time too.

:func:`profile_reads` checks the attribution with Nsight Compute: for each size, the bytes the
kernel read from DRAM and the sectors the L2 served to the SMs. Only the counters can say which
level served the reads; the timing alone cannot.

Run as ``python -m infralens.gpuarch.cache_sweep --working-set-mib N --total-mib M``, it launches
the kernel once, for ``ncu`` to watch (:func:`profile_reads` does that).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from infralens.tools import ncu
from infralens.tools.bench import bench
from infralens.tools.cli import OneLineParser, UsageError, positive_int, run_main

__all__ = ["BLOCK_BYTES", "DEFAULT_SIZES_MIB", "DEFAULT_TOTAL_MIB", "NCU_READ_METRICS", "plan",
           "measure_read_bandwidth", "sweep", "profile_reads", "main"]

#: Elements per block (float32): each program reads 16 KiB per step.
BLOCK_ELEMENTS = 4096
BLOCK_BYTES = 4 * BLOCK_ELEMENTS
#: Working sets of the sweep, in MiB: from well inside an H100's L2 to far beyond it.
DEFAULT_SIZES_MIB = (2, 4, 8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64, 96, 128, 256, 512, 1024)
#: Bytes read per timed call, in MiB, whatever the working set.
DEFAULT_TOTAL_MIB = 4096
#: Programs per SM, and warps per program: 8 x 4 = 32 warps on each SM.
PROGRAMS_PER_SM, NUM_WARPS = 8, 4
#: Bytes from DRAM, sectors the L2 served to the SMs' L1/TEX units, the hit rate of those reads,
#: and sectors that crossed between the two halves of the L2 (the "LTC fabric").
NCU_READ_METRICS = ("dram__bytes_read.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
                    "lts__t_sector_op_read_hit_rate.pct", "lts__t_sectors_srcunit_ltcfabric.sum",
                    "gpu__time_duration.sum")
#: Bytes per L2 sector.
SECTOR_BYTES = 32


# [gpuarch:cache-sweep-plan]
def plan(working_set_bytes: int, total_bytes: int, programs: int) -> dict:
    """The launch that reads ``total_bytes`` (rounded up to whole steps) from a buffer of
    ``working_set_bytes`` with ``programs`` programs."""
    if working_set_bytes < BLOCK_BYTES or working_set_bytes % BLOCK_BYTES:
        raise ValueError(f"the working set must be a positive multiple of {BLOCK_BYTES} B, "
                         f"got {working_set_bytes}")
    if total_bytes < working_set_bytes:
        raise ValueError(f"total_bytes ({total_bytes}) must cover the working set ({working_set_bytes})")
    if programs < 1:
        raise ValueError(f"programs must be >= 1, got {programs}")
    n_blocks = working_set_bytes // BLOCK_BYTES
    reads = -(-total_bytes // (BLOCK_BYTES * programs))   # per program, rounded up
    return {"working_set_bytes": working_set_bytes, "n_blocks": n_blocks, "programs": programs,
            "reads_per_program": reads, "bytes_read": reads * programs * BLOCK_BYTES,
            "passes": reads * programs / n_blocks}
# [/gpuarch:cache-sweep-plan]


def _launcher(working_set_bytes: int, total_bytes: int, *, device: str, programs: int | None = None):
    """(plan, a no-argument launch, the input, the per-program sums) for one working set."""
    import torch

    from infralens.kernels.triton_copy import repeat_read_kernel

    if programs is None:
        programs = PROGRAMS_PER_SM * torch.cuda.get_device_properties(device).multi_processor_count
    p = plan(working_set_bytes, total_bytes, programs)
    x = torch.randn(working_set_bytes // 4, device=device)
    out = torch.empty(programs, device=device)

    def launch() -> None:
        repeat_read_kernel[(programs,)](x, out, p["n_blocks"], p["reads_per_program"],
                                        BLOCK_SIZE=BLOCK_ELEMENTS, num_warps=NUM_WARPS)
    return p, launch, x, out


def measure_read_bandwidth(working_set_bytes: int, total_bytes: int = DEFAULT_TOTAL_MIB << 20, *,
                           device: str = "cuda", programs: int | None = None,
                           rep_ms: float = 100) -> dict:
    """Time one working set: the :func:`plan`, the timing, and bytes read per second."""
    p, launch, _, _ = _launcher(working_set_bytes, total_bytes, device=device, programs=programs)
    timing = bench(launch, device=device, rep_ms=rep_ms)
    return {**p, **timing, "bytes_per_s": p["bytes_read"] / (timing["ms"] * 1e-3)}


def sweep(sizes_mib: Iterable[int] = DEFAULT_SIZES_MIB, total_mib: int = DEFAULT_TOTAL_MIB, *,
          device: str = "cuda", rep_ms: float = 100) -> list[dict]:
    """:func:`measure_read_bandwidth` for every working set of ``sizes_mib``."""
    return [measure_read_bandwidth(s << 20, total_mib << 20, device=device, rep_ms=rep_ms)
            for s in sizes_mib]


def profile_reads(sizes_mib: Sequence[int], total_mib: int = DEFAULT_TOTAL_MIB, *,
                  metrics: Sequence[str] = NCU_READ_METRICS, timeout: float = 300.0) -> dict:
    """Nsight Compute's counters of one launch per working set (caches flushed before it, as
    ncu does by default): DRAM bytes read against the bytes the kernel asked the L2 for."""
    env = dict(os.environ)  # the driver imports this package: make sure it can
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    env.pop("TRITON_INTERPRET", None)  # the real compiler, not the CPU interpreter
    out: dict = {"runs": {}}
    for size in sizes_mib:
        prof = ncu.profile([sys.executable, "-m", "infralens.gpuarch.cache_sweep",
                            "--working-set-mib", str(size), "--total-mib", str(total_mib)],
                           metrics, kernel_regex="repeat_read", env=env, timeout=timeout)
        out["ncu_version"], out["missing"] = prof["ncu_version"], prof["missing"]
        (counters,) = prof["kernels"].values()
        l2_read = (counters.get("lts__t_sectors_srcunit_tex_op_read.sum") or 0) * SECTOR_BYTES
        out["runs"][str(size)] = {"working_set_bytes": size << 20, "counters": counters,
                                  "l2_read_bytes": l2_read,
                                  "dram_read_bytes": counters.get("dram__bytes_read.sum")}
    return out


def _drive(args: argparse.Namespace) -> None:
    import torch

    p, launch, x, out = _launcher(args.working_set_mib << 20, args.total_mib << 20, device="cuda")
    launch()
    torch.cuda.synchronize()
    print(f"read {p['bytes_read']:,} B from a buffer of {p['working_set_bytes']:,} B "
          f"({p['passes']:.1f} passes); sum {out.double().sum().item():.6g}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m infralens.gpuarch.cache_sweep",
                           description="Read one buffer repeatedly from L2, once, for Nsight Compute "
                                       "to watch.")
    parser.add_argument("--working-set-mib", type=positive_int, required=True,
                        help="size of the buffer read over and over, MiB")
    parser.add_argument("--total-mib", type=positive_int, default=DEFAULT_TOTAL_MIB,
                        help="bytes read in all, MiB (at least the working set)")

    def prepare(argv: Sequence[str] | None) -> argparse.Namespace:
        args = parser.parse_args(argv)
        if args.total_mib < args.working_set_mib:
            raise UsageError(f"--total-mib {args.total_mib} is smaller than --working-set-mib "
                             f"{args.working_set_mib}: every byte of the buffer is read at least once")
        import torch

        if not torch.cuda.is_available():
            raise UsageError(f"no CUDA GPU visible to PyTorch {torch.__version__}: the driver runs the "
                             "kernel on one (run it on a machine with an NVIDIA GPU)")
        free = torch.cuda.mem_get_info()[0]
        if args.working_set_mib << 20 > free:
            raise UsageError(f"a {args.working_set_mib} MiB buffer does not fit in the "
                             f"{free / 2**20:,.0f} MiB the GPU has free")
        return args

    return run_main(parser.prog, argv, prepare, _drive, errors=(UsageError,))


if __name__ == "__main__":
    raise SystemExit(main())
