"""Bus bandwidth of NCCL's collectives across message sizes, the way nccl-tests measures it.

    torchrun --standalone --nproc-per-node 4 -m infralens.parallel.collective_bench --out bw.json

For each collective (all-reduce, all-gather, reduce-scatter) and each size ``S`` (the whole
array, as :func:`~infralens.parallel.collectives.collective_bytes` takes it), every rank runs a few
warm-up calls, then ``--iters`` calls between two CUDA events; the time is the slowest rank's
mean. ``algbw = S / t`` and ``busbw = collective_bytes(op, n, S) / t``. Set ``NCCL_ALGO`` (Ring,
Tree) in the environment to pin NCCL's algorithm. Rank 0 writes JSON.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from infralens.parallel.collectives import collective_bytes
from infralens.tools.cli import OneLineParser, UsageError, output_path, positive_int, run_main, write_json
from infralens.training.train_ddp import LaunchError, init_distributed, process_group

PROG = "infralens.parallel.collective_bench"
OPS = ("all_reduce", "all_gather", "reduce_scatter")


def _call(op: str, full: torch.Tensor, shard: torch.Tensor) -> None:
    if op == "all_reduce":
        dist.all_reduce(full)
    elif op == "all_gather":
        dist.all_gather_into_tensor(full, shard)
    else:
        dist.reduce_scatter_tensor(shard, full)


def measure(op: str, size: int, world: int, device, iters: int) -> dict:
    elements = size // 2  # bf16
    full = torch.ones(elements, dtype=torch.bfloat16, device=device)
    shard = torch.ones(elements // world, dtype=torch.bfloat16, device=device)
    for _ in range(3):
        _call(op, full, shard)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        _call(op, full, shard)
    end.record()
    torch.cuda.synchronize()
    seconds = torch.tensor(start.elapsed_time(end) / 1e3 / iters, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)  # the slowest rank's time
    t = float(seconds)
    return {"op": op, "bytes": size, "seconds": t, "algbw": size / t,
            "busbw": collective_bytes(op, world, size) / t}


def _prepare(argv):
    parser = OneLineParser(prog=f"torchrun --nproc-per-node N -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=output_path, help="rank 0 writes the JSON here")
    parser.add_argument("--min-bytes", type=positive_int, default=4 * 1024)
    parser.add_argument("--max-bytes", type=positive_int, default=4 * 1024**3)
    parser.add_argument("--factor", type=positive_int, default=4, help="size step (default 4)")
    parser.add_argument("--iters", type=positive_int, default=20)
    parser.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, from {', '.join(OPS)}")
    args = parser.parse_args(argv)
    args.ops = tuple(args.ops.split(","))
    if not set(args.ops) <= set(OPS):
        raise UsageError(f"--ops: choose from {', '.join(OPS)}; got {','.join(args.ops)}")
    if args.factor < 2 or args.min_bytes > args.max_bytes:
        raise UsageError("need --factor >= 2 and --min-bytes <= --max-bytes")
    if not torch.cuda.is_available():
        raise UsageError("the collective benchmark needs CUDA GPUs (NCCL)")
    return args, init_distributed("cuda")


def _run(prepared) -> None:
    args, ctx = prepared
    sizes, s = [], args.min_bytes
    while s <= args.max_bytes:
        sizes.append(s)
        s *= args.factor
    with process_group(ctx):
        rows = []
        for op in args.ops:
            for size in sizes:
                if size % (2 * ctx.world):
                    continue
                iters = args.iters if size < 256 * 1024**2 else max(3, args.iters // 4)
                rows.append(measure(op, size, ctx.world, ctx.device, iters))
        if ctx.is_main:
            write_json(args.out, {"world": ctx.world, "nccl_algo": os.environ.get("NCCL_ALGO", "default"),
                                  "nccl_version": ".".join(map(str, torch.cuda.nccl.version())),
                                  "gpu": torch.cuda.get_device_name(), "rows": rows})
            best = max(r["busbw"] for r in rows if r["op"] == "all_reduce")
            algo = os.environ.get("NCCL_ALGO", "default")
            print(f"{ctx.world} x {torch.cuda.get_device_name()}, NCCL_ALGO={algo}: "
                  f"peak all-reduce bus bandwidth {best / 1e9:.0f} GB/s")


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run, errors=(UsageError, LaunchError))


if __name__ == "__main__":
    sys.exit(main())
