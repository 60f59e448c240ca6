"""Tensor parallelism on real ranks: the split block computes the single-process block's function,
and sends what the formula says.

    torchrun --standalone --nproc-per-node 4 -m infralens.parallel.tp_check --out tp.json

Every rank builds the same GPT block (same seed) and the same input, runs it whole (the
reference) and as its :class:`~infralens.parallel.tensor.TensorParallelBlock` shard, and
compares the output and every gradient (its shard's slice of the reference's). On CPU this runs
in float64 over gloo. ``--time`` instead times forward + backward of a larger bf16 block on GPUs
(NCCL), with and without the all-reduces, for the share communication takes. Rank 0 writes JSON.
"""

from __future__ import annotations

import json
import sys
import time

import torch
import torch.distributed as dist

from infralens.models.gpt import Block, GPTConfig
from infralens.parallel import collective_bytes
from infralens.parallel.tensor import COMMUNICATE, TRAFFIC, TensorParallelBlock
from infralens.tools.cli import OneLineParser, UsageError, output_path, positive_int, run_main, write_json
from infralens.training.train_ddp import LaunchError, init_distributed, process_group

PROG = "infralens.parallel.tp_check"
SEED = 0


def _reference_slices(ref: Block, tp: TensorParallelBlock, rank: int, world: int) -> dict:
    """The reference block's gradient slices that correspond to this rank's shard."""
    h = ref.ln1.normalized_shape[0]
    d = h // ref.attn.n_heads
    rows = slice(rank * tp.heads * d, (rank + 1) * tp.heads * d)
    gq, gk, gv = ref.attn.qkv.weight.grad.split(h)
    bq, bk, bv = ref.attn.qkv.bias.grad.split(h)
    f = ref.mlp.fc.out_features // world
    cols = slice(rank * f, (rank + 1) * f)
    return {"qkv_w": torch.cat([gq[rows], gk[rows], gv[rows]]),
            "qkv_b": torch.cat([bq[rows], bk[rows], bv[rows]]),
            "proj_w": ref.attn.proj.weight.grad[:, rows], "proj_b": ref.attn.proj.bias.grad,
            "fc_w": ref.mlp.fc.weight.grad[cols], "fc_b": ref.mlp.fc.bias.grad[cols],
            "out_w": ref.mlp.proj.weight.grad[:, cols], "out_b": ref.mlp.proj.bias.grad,
            "ln1.weight": ref.ln1.weight.grad, "ln1.bias": ref.ln1.bias.grad,
            "ln2.weight": ref.ln2.weight.grad, "ln2.bias": ref.ln2.bias.grad}


def check(world: int, rank: int, cfg: GPTConfig, batch: int, seq: int) -> dict:
    torch.manual_seed(SEED)
    ref = Block(cfg).double()
    x = torch.randn(batch, seq, cfg.d_model, dtype=torch.float64)
    w = torch.randn(batch, seq, cfg.d_model, dtype=torch.float64)  # loss = sum(out * w)
    (ref(x) * w).sum().backward()
    tp = TensorParallelBlock(ref, rank, world)
    TRAFFIC.clear()
    xt = x.clone().requires_grad_(True)
    out = tp(xt)
    (out * w).sum().backward()
    want = _reference_slices(ref, tp, rank, world)
    got = dict(tp.named_parameters())
    grad_err = max(float((got[k].grad - want[k]).abs().max()) for k in want)
    x_ref = x.clone().requires_grad_(True)
    (ref(x_ref) * w).sum().backward()  # the input gradient (weights' grads accumulate, unused)
    size = batch * seq * cfg.d_model * 8
    return {"out_err": float((out - ref(x)).abs().max()), "grad_err": grad_err,
            "input_grad_err": float((xt.grad - x_ref.grad).abs().max()),
            "calls": {d: sum(1 for t in TRAFFIC if t[0] == d) for d in ("forward", "backward")},
            "tensor_bytes": sorted({t[2] for t in TRAFFIC}),
            "sent_per_rank": sum(collective_bytes("all_reduce", world, t[2]) for t in TRAFFIC),
            "formula_per_rank": 4 * collective_bytes("all_reduce", world, size)}


def timing(world: int, rank: int, cfg: GPTConfig, batch: int, seq: int, device, steps: int) -> dict:
    torch.manual_seed(SEED)
    ref = Block(cfg)
    tp = TensorParallelBlock(ref, rank, world).to(device=device, dtype=torch.bfloat16)
    x = torch.randn(batch, seq, cfg.d_model, device=device, dtype=torch.bfloat16, requires_grad=True)
    out = {}
    for communicate in (True, False):
        COMMUNICATE[0] = communicate
        for i in range(steps + 3):
            if i == 3:
                torch.cuda.synchronize()
                dist.barrier()
                start = time.perf_counter()
            tp(x).float().sum().backward()
        torch.cuda.synchronize()
        out["step_s" if communicate else "no_comm_step_s"] = (time.perf_counter() - start) / steps
    COMMUNICATE[0] = True
    out["comm_share"] = 1 - out["no_comm_step_s"] / out["step_s"]
    return out


def _prepare(argv):
    parser = OneLineParser(prog=f"torchrun --nproc-per-node N -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=output_path, help="rank 0 writes the JSON here")
    parser.add_argument("--time", action="store_true", help="time a bf16 block on GPUs instead")
    parser.add_argument("--hidden", type=positive_int, default=64)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--batch", type=positive_int, default=2)
    parser.add_argument("--seq", type=positive_int, default=16)
    parser.add_argument("--steps", type=positive_int, default=20)
    args = parser.parse_args(argv)
    if args.hidden % args.heads:
        raise UsageError(f"--heads {args.heads} must divide --hidden {args.hidden}")
    return args, init_distributed("cuda" if args.time else "cpu")


def _run(prepared) -> None:
    args, ctx = prepared
    cfg = GPTConfig(d_model=args.hidden, n_heads=args.heads, n_layers=1, n_positions=args.seq)
    with process_group(ctx):
        if cfg.n_heads % ctx.world:
            raise UsageError(f"{ctx.world} ranks must divide the {cfg.n_heads} heads")
        if args.time:
            res = timing(ctx.world, ctx.rank, cfg, args.batch, args.seq, ctx.device, args.steps)
        else:
            res = check(ctx.world, ctx.rank, cfg, args.batch, args.seq)
        everyone = [None] * ctx.world
        dist.all_gather_object(everyone, res)
        if ctx.is_main:
            report = {"world": ctx.world, "hidden": args.hidden, "heads": args.heads, "batch": args.batch,
                      "seq": args.seq, "ranks": everyone}
            write_json(args.out, report)
            print(json.dumps(everyone[0]))


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run, errors=(UsageError, LaunchError))


if __name__ == "__main__":
    sys.exit(main())
