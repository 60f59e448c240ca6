"""Lab 03 on GPUs: how long a DDP step takes, how long its all-reduce takes, and how much of
the all-reduce hides under backward.

    torchrun --standalone --nproc-per-node 2 -m infralens.training.ddp_overlap --device cuda \\
        --preset gpt2-1b --amp --batch 4 --seq-len 1024 --out overlap.json

For each bucket size (DDP's default 25 MiB, and one bucket larger than all gradients, which
cannot start before backward ends), every rank measures three things on the same model and
batch:

1. **Step time**, DDP as usual, against the same step under ``no_sync()`` (no communication at
   all): the difference is the whole price of synchronizing, not only the communication the
   step waits for: it also holds the reducer's own work and the slowdown of backward kernels
   that run beside the all-reduce (the field keeps its recorded name, ``waited_for_comm_s``).
2. **A profile** (``torch.profiler``, a few steps): every GPU kernel with its start, duration
   and stream. NCCL's kernels are the all-reduce; a kernel launched while the CPU was inside
   the ``backward`` range (found through the launch's correlation id) is backward compute.
   :func:`analyze_trace` measures, per step, the time some all-reduce kernel is running, and the
   part of it during which a backward kernel also runs: the overlap.
3. **The all-reduce alone**: one ``all_reduce`` of a buffer as large as all gradients, for its
   bus bandwidth.

A caveat the numbers carry: an NCCL kernel starts when it is launched and ends when the data
has arrived, so its duration includes any time spent waiting for the slower rank.

Rank 0 writes every rank's results as JSON (``--out``). On the CPU (gloo) the same code runs,
without GPU kernels to analyse: that is how the tests exercise it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from dataclasses import replace

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

from infralens.models.gpt import GPT
from infralens.parallel.collectives import bus_bandwidth
from infralens.tools.cli import output_path, positive_int, run_main, write_json
from infralens.training.train_ddp import DistContext, init_distributed, process_group, rank_config, wrap
from infralens.training.train_single_gpu import TrainConfig, num_params
from infralens.training.train_single_gpu import build_parser as single_gpu_parser

PROG = "infralens.training.ddp_overlap"
LABELS = ("lab03:forward", "lab03:backward", "lab03:optimizer")
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")

Interval = tuple[float, float]  # (start, end), microseconds


# --- interval arithmetic --------------------------------------------------------------------------

def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering the same time."""
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if end <= start:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def length(intervals: Iterable[Interval]) -> float:
    return sum(b - a for a, b in union(intervals))


def intersection(a: Iterable[Interval], b: Iterable[Interval]) -> list[Interval]:
    """The time covered by both sets of intervals."""
    a, b = union(a), union(b)
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        start, end = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if start < end:
            out.append((start, end))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


# --- trace analysis --------------------------------------------------------------------------------

# [ddp:overlap]
def analyze_trace(trace: dict, steps: int) -> dict:
    """All-reduce time, backward time and their overlap, per step, from a Chrome trace.

    ``trace`` is what ``torch.profiler``'s ``export_chrome_trace`` writes. GPU work is every
    event of a GPU category; NCCL kernels (name contains "nccl") are communication, the rest is
    compute. A compute kernel belongs to backward if the CPU launched it inside a
    ``lab03:backward`` range (kernel and launch share a correlation id).
    """
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    launches, ranges, gpu = {}, [], []
    for e in events:
        cat, args = e.get("cat", ""), e.get("args") or {}
        if cat in GPU_CATEGORIES:
            gpu.append(e)
        elif cat in LAUNCH_CATEGORIES and "correlation" in args:
            launches[args["correlation"]] = e["ts"]
        elif e.get("name") == "lab03:backward" and cat != "gpu_user_annotation" and "dur" in e:
            ranges.append((e["ts"], e["ts"] + e["dur"]))
    comm, compute, backward = [], [], []
    for e in gpu:
        span = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        if "nccl" in e.get("name", "").lower():
            comm.append(span)
            continue
        compute.append(span)
        launched = launches.get((e.get("args") or {}).get("correlation"))
        if launched is not None and any(a <= launched <= b for a, b in ranges):
            backward.append(span)
    comm_us = length(comm)
    hidden_by_backward = length(intersection(comm, backward))  # all-reduce while backward computes
    hidden_by_any = length(intersection(comm, compute))  # ... while any kernel computes
    per = 1e-6 / steps  # microseconds in the whole trace -> seconds per step
    return {
        "allreduce_s": comm_us * per,
        "backward_compute_s": length(backward) * per,
        "compute_s": length(compute) * per,
        "overlap_backward_s": hidden_by_backward * per,
        "overlap_any_s": hidden_by_any * per,
        "exposed_s": (comm_us - hidden_by_any) * per,  # all-reduce with no kernel beside it
        "overlap_fraction": hidden_by_backward / comm_us if comm_us else None,
        "nccl_kernels_per_step": len(comm) / steps,
    }
# [/ddp:overlap]


# --- reading a record: what is timed and what is profiled -------------------------------------------

def timed_price(results: dict) -> dict:
    """From a run's results (``runs`` with ``default`` and ``one-bucket``), the timed numbers in
    seconds per step: the price of synchronizing (step - ``no_sync`` step) for each bucket layout,
    and what the default buckets gain over one bucket."""
    d, o = results["runs"]["default"], results["runs"]["one-bucket"]
    return {"cost": d["step_s"] - d["no_sync_step_s"], "one_cost": o["step_s"] - o["no_sync_step_s"],
            "gain": o["step_s"] - d["step_s"]}


def profiled_parts(results: dict) -> dict:
    """Per rank (lists, rank order), from the profiles: the backward slowdown beside the all-reduce
    (default minus one bucket), the exposed all-reduce of both layouts, the GPU's busy time per step
    (compute plus exposed all-reduce) of both layouts, and the default layout's all-reduce time."""
    pairs = list(zip(results["runs"]["default"]["profile_by_rank"],
                     results["runs"]["one-bucket"]["profile_by_rank"], strict=True))
    return {"slowdown": [a["backward_compute_s"] - b["backward_compute_s"] for a, b in pairs],
            "exposed": [a["exposed_s"] for a, _ in pairs],
            "busy": [a["compute_s"] + a["exposed_s"] for a, _ in pairs],
            "one_exposed": [b["exposed_s"] for _, b in pairs],
            "one_busy": [b["compute_s"] + b["exposed_s"] for _, b in pairs],
            "allreduce": [a["allreduce_s"] for a, _ in pairs]}


# --- the measurement (one rank) --------------------------------------------------------------------

def _step(ddp, optimizer, x, y, autocast, sync: bool = True) -> None:
    with nullcontext() if sync else ddp.no_sync():
        with record_function("lab03:forward"), autocast:
            loss = ddp(x, y)[1]  # the logits are not kept through backward
        with record_function("lab03:backward"):
            loss.backward()
    with record_function("lab03:optimizer"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def _sync(ctx: DistContext) -> None:
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)


def _time_steps(n: int, ctx: DistContext, run) -> float:
    """Seconds per call of ``run`` over ``n`` calls, the slowest rank's (a step ends for all)."""
    dist.barrier()
    _sync(ctx)
    start = time.perf_counter()
    for _ in range(n):
        run()
    _sync(ctx)
    seconds = torch.tensor([(time.perf_counter() - start) / n], dtype=torch.float64, device=ctx.device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX)
    return float(seconds)


def allreduce_alone(numel: int, ctx: DistContext, repeats: int = 5) -> dict:
    """One all-reduce of ``numel`` fp32 values: time, algorithm and bus bandwidth (NCCL-tests)."""
    buf = torch.ones(numel, dtype=torch.float32, device=ctx.device)
    for _ in range(2):
        dist.all_reduce(buf)
    seconds = _time_steps(repeats, ctx, lambda: dist.all_reduce(buf))
    nbytes = buf.numel() * buf.element_size()
    algbw = nbytes / seconds
    return {"bytes": nbytes, "seconds": seconds, "algbw": algbw,
            "busbw": bus_bandwidth("all_reduce", ctx.world, nbytes, seconds)}


def measure_bucket(cfg: TrainConfig, ctx: DistContext, bucket_cap_mb: float | None, *, warmup: int,
                   steps: int, profile_steps: int) -> dict:
    """Step time with and without communication, and the profile, for one bucket size."""
    torch.manual_seed(cfg.seed)
    with ctx.device:
        model = GPT(cfg.model, checkpoint=cfg.checkpoint)
    ddp = wrap(model, ctx, bucket_cap_mb)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed + ctx.rank)  # each rank its own batch
    x, y = (torch.randint(0, cfg.model.vocab_size, (cfg.batch, cfg.seq_len), generator=gen)
            .to(ctx.device) for _ in range(2))
    autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=cfg.amp)
    for _ in range(warmup):  # the first iterations also rebuild DDP's buckets
        _step(ddp, optimizer, x, y, autocast)
    ddp_s = _time_steps(steps, ctx, lambda: _step(ddp, optimizer, x, y, autocast))
    local_s = _time_steps(steps, ctx, lambda: _step(ddp, optimizer, x, y, autocast, sync=False))
    _step(ddp, optimizer, x, y, autocast)  # back to synchronized steps before profiling
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if ctx.device.type == "cuda" else [])
    dist.barrier()
    with profile(activities=activities) as prof:
        for _ in range(profile_steps):
            _step(ddp, optimizer, x, y, autocast)
        _sync(ctx)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            analysis = analyze_trace(json.load(f), profile_steps)
    grad_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return {"bucket_cap_mb": bucket_cap_mb, "grad_bytes": grad_bytes, "step_s": ddp_s,
            "no_sync_step_s": local_s, "waited_for_comm_s": ddp_s - local_s, "profile": analysis}


def build_parser() -> argparse.ArgumentParser:
    parser = single_gpu_parser()
    parser.prog = f"torchrun --nproc-per-node N -m {PROG}"
    parser.description = "DDP step time, all-reduce time and overlap with backward, per bucket size."
    parser.set_defaults(device="auto", steps=10, batch=4, seq_len=64)
    parser.add_argument("--warmup", type=positive_int, default=3, help="untimed steps first (default 3)")
    parser.add_argument("--profile-steps", type=positive_int, default=3, help="steps in the profile")
    parser.add_argument("--out", type=output_path, help="rank 0 writes the results here (JSON)")
    return parser


def _prepare(argv: Sequence[str] | None) -> tuple[argparse.Namespace, TrainConfig, DistContext]:
    args = build_parser().parse_args(argv)
    cfg, device = rank_config(args)
    if args.warmup < 2 or args.profile_steps < 1:
        raise ValueError("need --warmup >= 2 (DDP rebuilds its buckets) and --profile-steps >= 1")
    ctx = init_distributed(device)
    return args, replace(cfg, device=str(ctx.device)), ctx


def _run(prepared: tuple[argparse.Namespace, TrainConfig, DistContext]) -> None:
    args, cfg, ctx = prepared
    with process_group(ctx):
        psi = num_params(cfg.model)
        one_bucket_mb = 2 * 4 * psi / 2**20  # more than all fp32 gradients: a single bucket
        results = {"world": ctx.world, "backend": ctx.backend, "config": cfg.model.to_dict(),
                   "batch": cfg.batch, "seq_len": cfg.seq_len, "amp": cfg.amp, "num_params": psi,
                   "steps_timed": cfg.steps, "profile_steps": args.profile_steps, "runs": {}}
        if ctx.device.type == "cuda":
            results["gpu"] = torch.cuda.get_device_name(ctx.device)
        results["allreduce_alone"] = allreduce_alone(psi, ctx)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()  # the buffer is gone with the function's frame
        for name, cap in (("default", None), ("one-bucket", one_bucket_mb)):
            mine = measure_bucket(cfg, ctx, cap, warmup=args.warmup, steps=cfg.steps,
                                  profile_steps=args.profile_steps)
            gc.collect()  # the model, DDP's buckets and the optimizer of this run go now
            if ctx.device.type == "cuda":
                torch.cuda.empty_cache()
            ranks = [None] * ctx.world
            dist.all_gather_object(ranks, mine["profile"])
            mine["profile_by_rank"] = ranks
            results["runs"][name] = mine
            if ctx.is_main:
                p = mine["profile"]
                size = "25 MiB, first 1 MiB" if cap is None else f"{cap:,.0f} MiB"
                print(f"{name} buckets ({size}): step {mine['step_s'] * 1e3:.2f} ms, "
                      f"no_sync step {mine['no_sync_step_s'] * 1e3:.2f} ms; all-reduce kernels "
                      f"{p['allreduce_s'] * 1e3:.2f} ms per step ({p['nccl_kernels_per_step']:g} "
                      f"kernels), {p['overlap_backward_s'] * 1e3:.2f} ms of it beside backward",
                      flush=True)
        if ctx.is_main and args.out:
            write_json(args.out, results)


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run)


if __name__ == "__main__":
    sys.exit(main())
