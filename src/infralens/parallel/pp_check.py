"""Pipeline parallelism on real ranks with ``torch.distributed.pipelining``: the pipelined gradients
are the unpipelined model's, and each stage's measured timeline is what the simulator draws.

    torchrun --standalone --nproc-per-node 4 -m infralens.parallel.pp_check --out pp.json

A stack of GPT blocks (float64 on CPU over gloo), split evenly into one stage per rank, runs one
training step under GPipe and under 1F1B with ``--microbatches`` micro-batches. Every rank
compares its stage's gradients with the same blocks' gradients in one process (same seed, the
whole batch at once), and records when each forward and backward of its stage started and ended
(module hooks). Rank 0 writes JSON.

``--time`` instead times the schedules on GPUs (bf16, NCCL): the mean step, and each stage's
forward + backward of one micro-batch run alone, whose ``m``-fold sum is the step without a bubble.
"""

from __future__ import annotations

import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

from infralens.models.gpt import Block, GPTConfig
from infralens.tools.cli import OneLineParser, UsageError, output_path, positive_int, run_main, write_json
from infralens.training.train_ddp import LaunchError, init_distributed, process_group

PROG = "infralens.parallel.pp_check"
SEED = 0
SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}


def build(cfg: GPTConfig, layers: int) -> nn.Sequential:
    torch.manual_seed(SEED)
    return nn.Sequential(*(Block(cfg) for _ in range(layers))).double()


def loss_fn(out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return ((out - target) ** 2).mean()


def _schedule(schedule: str, stage_module: nn.Module, ctx, micro: int, x: torch.Tensor,
              target: torch.Tensor):
    """One step of ``schedule`` on this rank's stage: the first rank feeds the input, the last the
    target, the others only pass activations and gradients on."""
    stage = PipelineStage(stage_module, ctx.rank, ctx.world, ctx.device)
    sched = SCHEDULES[schedule](stage, n_microbatches=micro, loss_fn=loss_fn)

    def run() -> None:
        if ctx.rank == 0:
            sched.step(x)
        elif ctx.rank == ctx.world - 1:
            sched.step(target=target)
        else:
            sched.step()
    return run


class _Timeline:
    """Start and end of every forward and backward of one module, by hooks."""

    def __init__(self, module: nn.Module, t0: float) -> None:
        self.events: list[tuple[str, float, float]] = []
        self._start = {}
        module.register_forward_pre_hook(lambda m, a: self._open("F"))
        module.register_forward_hook(lambda m, a, o: self._close("F"))
        module.register_full_backward_pre_hook(lambda m, g: self._open("B"))
        module.register_full_backward_hook(lambda m, gi, go: self._close("B"))
        self.t0 = t0

    def _open(self, kind: str) -> None:
        self._start[kind] = time.perf_counter()

    def _close(self, kind: str) -> None:
        self.events.append((kind, self._start.pop(kind) - self.t0, time.perf_counter() - self.t0))


def step(schedule: str, ctx, cfg: GPTConfig, layers: int, batch: int, seq: int, micro: int) -> dict:
    full = build(cfg, layers)
    per = layers // ctx.world
    torch.manual_seed(SEED + 1)
    x = torch.randn(batch, seq, cfg.d_model, dtype=torch.float64)
    target = torch.randn(batch, seq, cfg.d_model, dtype=torch.float64)
    loss_fn(full(x), target).backward()  # the reference: one process, the whole batch
    mine = nn.Sequential(*list(full.children())[ctx.rank * per:(ctx.rank + 1) * per])
    want = {n: p.grad.clone() for n, p in mine.named_parameters()}
    mine.zero_grad(set_to_none=True)
    run = _schedule(schedule, mine, ctx, micro, x, target)
    run()  # the first step also infers the shapes stages exchange: not part of the timeline
    mine.zero_grad(set_to_none=True)
    dist.barrier()
    timeline = _Timeline(mine, time.perf_counter())
    run()
    err = max(float((p.grad - want[n]).abs().max()) for n, p in mine.named_parameters())
    return {"grad_err": err, "events": timeline.events}


def timing(schedule: str, ctx, cfg: GPTConfig, layers: int, batch: int, seq: int, micro: int,
           steps: int) -> dict:
    per = layers // ctx.world
    torch.manual_seed(SEED)
    mine = nn.Sequential(*(Block(cfg) for _ in range(per))).to(ctx.device, torch.bfloat16)
    x = torch.randn(batch, seq, cfg.d_model, device=ctx.device, dtype=torch.bfloat16)
    target = torch.randn_like(x)
    run = _schedule(schedule, mine, ctx, micro, x, target)

    def clock(fn, n: int) -> float:
        for _ in range(2):
            fn()
        torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(n):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - start) / n

    step_s = clock(run, steps)
    xm = torch.randn(batch // micro, seq, cfg.d_model, device=ctx.device, dtype=torch.bfloat16,
                     requires_grad=True)
    alone_s = clock(lambda: mine(xm).float().sum().backward(), steps)
    return {"step_s": step_s, "stage_s": alone_s}


def _prepare(argv):
    parser = OneLineParser(prog=f"torchrun --nproc-per-node N -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=output_path, help="rank 0 writes the JSON here")
    parser.add_argument("--layers-per-stage", type=positive_int, default=2)
    parser.add_argument("--microbatches", type=positive_int, default=8)
    parser.add_argument("--batch", type=positive_int, default=16)
    parser.add_argument("--seq", type=positive_int, default=32)
    parser.add_argument("--hidden", type=positive_int, default=128)
    parser.add_argument("--time", action="store_true", help="time the schedules on GPUs instead")
    parser.add_argument("--steps", type=positive_int, default=10)
    args = parser.parse_args(argv)
    if args.batch % args.microbatches:
        raise UsageError(f"--microbatches {args.microbatches} must divide --batch {args.batch}")
    return args, init_distributed("cuda" if args.time else "cpu")


def _run(prepared) -> None:
    args, ctx = prepared
    cfg = GPTConfig(d_model=args.hidden, n_heads=max(4, args.hidden // 128), n_layers=1,
                    n_positions=args.seq)
    layers = args.layers_per_stage * ctx.world
    with process_group(ctx):
        if args.time:
            res = {name: timing(name, ctx, cfg, layers, args.batch, args.seq, args.microbatches,
                                args.steps) for name in SCHEDULES}
        else:
            res = {name: step(name, ctx, cfg, layers, args.batch, args.seq, args.microbatches)
                   for name in SCHEDULES}
        everyone = [None] * ctx.world
        dist.all_gather_object(everyone, res)
        if ctx.is_main:
            report = {"world": ctx.world, "microbatches": args.microbatches, "layers": layers,
                      "ranks": everyone}
            write_json(args.out, report)
            if args.time:
                for name in SCHEDULES:
                    ideal = args.microbatches * max(r[name]["stage_s"] for r in everyone)
                    step_s = everyone[0][name]["step_s"]
                    print(f"{name}: step {step_s * 1e3:.1f} ms, bubble {step_s / ideal - 1:.3f}")
            else:
                errs = {s: max(r[s]["grad_err"] for r in everyone) for s in SCHEDULES}
                print(f"{ctx.world} stages, {layers} blocks, {args.microbatches} micro-batches; "
                      f"largest gradient difference from one process: {errs}")


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run, errors=(UsageError, LaunchError))


if __name__ == "__main__":
    sys.exit(main())
