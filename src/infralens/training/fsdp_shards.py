"""Lab 08: each rank's share of the model state under DDP and FSDP2, measured.

    torchrun --standalone --nproc-per-node 2 -m infralens.training.fsdp_shards      # 2 CPU ranks
    torchrun --standalone --nproc-per-node 2 -m infralens.training.fsdp_shards --device cuda \\
        --preset gpt2-1b --batch 2 --seq-len 1024 --modes ddp,fsdp --out memory.json     # 2 GPUs

Every mode trains Lab 02's loop (``train_single_gpu.train``) with the model wrapped by ``wrap``:

==================  ==========================================================================
mode                what each rank keeps
==================  ==========================================================================
``ddp``             the whole model, its gradients and optimizer state, plus DDP's gradient
                    buckets (another 4 bytes per parameter)
``ddp-bucket-view`` the same, but ``.grad`` lives inside the buckets (``gradient_as_bucket_view``)
``fsdp``            ``fully_shard`` on every block and the root: 1/W of every parameter (dim 0),
                    gradient and optimizer state; parameters are gathered per block for forward
                    and again for backward (ZeRO-3)
``fsdp-no-reshard`` ``reshard_after_forward=False``: gathered blocks stay from forward to
                    backward, so one all-gather per block and step (ZeRO-2's peak)
``fsdp-bf16``       ``fsdp`` with ``MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)``:
                    fp32 shards, bf16 gathered copies for compute
==================  ==========================================================================

After each phase of each step a rank reads the bytes of its *local* tensors (``DTensor.to_local``:
parameters, ``.grad``, optimizer state), by storage, so FSDP's padding and shared buffers show,
and on a GPU the caching allocator (``memory_allocated`` and the peak in the phase). At the end it
also counts the elements it holds. Rank 0 gathers every rank's readings and writes them as JSON.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace

import torch
import torch.distributed as dist
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

from infralens.memory.measure import tensor_breakdown
from infralens.models.gpt import GPT
from infralens.tools.cli import output_path, run_main, write_json
from infralens.training.train_ddp import (
    DistContext,
    LaunchError,
    init_distributed,
    process_group,
    rank_config,
)
from infralens.training.train_single_gpu import MemoryWatch, TrainConfig, train
from infralens.training.train_single_gpu import build_parser as single_gpu_parser
from infralens.training.zero_memory_accounting import fsdp_local_numel

PROG = "infralens.training.fsdp_shards"
MODES = ("ddp", "ddp-bucket-view", "fsdp", "fsdp-no-reshard", "fsdp-bf16")


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if isinstance(t, DTensor) else t


# [fsdp:shard]
def shard(model: GPT, ctx: DistContext, mode: str) -> torch.nn.Module:
    """Wrap ``model`` for ``mode``: DDP replicates it, FSDP2 shards it in place block by block."""
    if mode.startswith("ddp"):
        return DDP(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,
                   gradient_as_bucket_view=mode == "ddp-bucket-view")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(ctx.device.type, (ctx.world,))  # one dimension: all ranks shard
    options = {"mesh": mesh, "reshard_after_forward": mode != "fsdp-no-reshard"}
    if mode == "fsdp-bf16":  # gather bf16 copies for compute; reduce gradients in fp32
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:  # one all-gather / reduce-scatter group per block
        fully_shard(block, **options)
    fully_shard(model, **options)  # the root: embeddings, final norm, the tied head
    return model
# [/fsdp:shard]


def local_breakdown(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None,
                    saved: dict | None = None, device: torch.device | None = None) -> dict[str, int]:
    """Bytes of this rank's storages of parameters, gradients and optimizer state (by storage).

    ``DTensor.untyped_storage()`` describes the global tensor, so each DTensor is read through
    ``to_local()``. A storage counts once, in the first category that holds it. Saved
    activations are left out (FSDP frees the gathered weights they refer to).
    """
    out = tensor_breakdown(model, optimizer, None, device, local=_local)
    del out["activations"]
    return out


def local_numel(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Elements this rank holds (not its padded storage): parameters, gradients, moments."""
    params = list(model.parameters())
    moments = sum(_local(v).numel() for st in optimizer.state.values() for k, v in st.items()
                  if k in ("exp_avg", "exp_avg_sq"))
    return {"params": sum(_local(p).numel() for p in params),
            "grads": sum(_local(p.grad).numel() for p in params if p.grad is not None),
            "moments": moments, "step_tensors": sum("step" in st for st in optimizer.state.values())}


class ShardWatch(MemoryWatch):
    """Lab 02's MemoryWatch reading local shards; also counts elements after each ``step``."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(device, breakdown=local_breakdown)

    def _read(self) -> dict:
        reading = super()._read()
        if self.optimizer is not None and self.optimizer.state:
            reading["numel"] = local_numel(self.model, self.optimizer)
        return reading


def measure(cfg: TrainConfig, ctx: DistContext, mode: str) -> dict:
    """One mode on this rank: Lab 02's loop with ``shard`` as the wrap; readings per phase."""
    watch = ShardWatch(ctx.device)
    wrap: Callable[[GPT], torch.nn.Module] = lambda model: shard(model, ctx, mode)  # noqa: E731
    result = train(cfg, watch=watch, wrap=wrap, data_seed=cfg.seed + ctx.rank)
    shapes = [list(p.shape) for p in result.model.parameters()]  # global shapes, tied weight once
    out = {"rank": ctx.rank, "readings": watch.readings, "losses": result.losses,
           "num_params": result.num_params, "param_shapes": shapes}
    del watch, result
    gc.collect()  # FSDP's states and the modules refer to each other: free them now
    if ctx.device.type == "cuda":
        torch.cuda.synchronize(ctx.device)
        torch.cuda.empty_cache()
    return out


# [fsdp:predict]
def state_prediction(mode: str, shapes: list[list[int]], world: int, rank: int) -> dict[str, dict]:
    """What one rank keeps of the model state after each phase of a steady-state step (fp32
    weights and gradients, AdamW), by the exact split FSDP2 makes; activations not included.

    DDP allocates its buckets (4 bytes per parameter) when it wraps the model; with
    ``gradient_as_bucket_view`` the gradients live in them, otherwise they come on top.
    FSDP2 pads every shard's storage to the largest rank's; Adam's moments are not padded.
    Under ``fsdp-no-reshard`` the gathered parameters stay from forward to backward.
    """
    psi = sum(math.prod(s) for s in shapes)
    if mode.startswith("ddp"):
        held = padded = psi
        buckets, grads = 4 * psi, (0 if mode == "ddp-bucket-view" else 4 * psi)
        gathered = 0
    else:
        held, padded = fsdp_local_numel(shapes, world, rank)
        buckets, grads = 0, 4 * padded  # the reduce-scatter output, one padded buffer per group
        gathered = 4 * padded * world if mode == "fsdp-no-reshard" else 0
    params, moments = 4 * padded, 8 * held
    lines = {
        "model": (params, 0, 0),
        "forward": (params + gathered, 0, moments),
        "backward": (params, grads, moments),
        "step": (params, grads, moments),
        "zero_grad": (params, 0, moments),
    }
    return {phase: {"params": p, "grads": g, "optimizer_state": o, "buckets": buckets,
                    "total": p + g + o + buckets} for phase, (p, g, o) in lines.items()}
# [/fsdp:predict]


def _table(report: dict, mode: str) -> list[str]:
    """Rank 0's printout: each rank's shards after the last step against the exact FSDP2 split."""
    world, shapes = report["world"], report["param_shapes"]
    lines = [f"{mode}: {report['num_params']:,} parameters over {world} ranks"]
    for r, rank in enumerate(report["modes"][mode]["ranks"]):
        last_step = [x for x in rank["readings"] if x["phase"] == "step"][-1]
        n, b = last_step["numel"], last_step["breakdown"]
        held, padded = (fsdp_local_numel(shapes, world, r) if mode.startswith("fsdp")
                        else (report["num_params"],) * 2)
        lines.append(f"  rank {r}: params {n['params']:,} elements (formula {held:,}), "
                     f"{b['params']:,} B of storage (padded formula {4 * padded:,} B); "
                     f"grads {n['grads']:,} elements, {b['grads']:,} B; "
                     f"optimizer {n['moments']:,} moment elements (formula {2 * held:,}), "
                     f"{b['optimizer_state']:,} B")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = single_gpu_parser()
    parser.prog = f"torchrun --nproc-per-node N -m {PROG}"
    parser.description = "Each rank's share of the model state under DDP and FSDP2, measured."
    parser.set_defaults(steps=2, device="auto", batch=2, seq_len=32)
    parser.add_argument("--modes", default="fsdp", help=f"comma-separated: {', '.join(MODES)}")
    parser.add_argument("--out", type=output_path, help="rank 0 writes every rank's readings here (JSON)")
    return parser


def _prepare(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str], TrainConfig,
                                                    DistContext]:
    args = build_parser().parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        raise ValueError(f"modes must be among {', '.join(MODES)}; got {args.modes!r}")
    cfg, device = rank_config(args)
    cfg.check_data()  # every rank reads the whole corpus (its own batches): one batch must fit
    ctx = init_distributed(device)  # a LaunchError is a ValueError: one line too
    return args, modes, replace(cfg, device=str(ctx.device)), ctx


def _run(prepared: tuple[argparse.Namespace, list[str], TrainConfig, DistContext]) -> None:
    args, modes, cfg, ctx = prepared
    with process_group(ctx):
        report: dict = {"world": ctx.world, "device": str(ctx.device.type), "config": cfg.model.to_dict(),
                        "batch": cfg.batch, "seq_len": cfg.seq_len, "steps": cfg.steps, "modes": {}}
        if ctx.device.type == "cuda":
            report["gpu"] = torch.cuda.get_device_name(ctx.device)
        for mode in modes:
            mine = measure(cfg, ctx, mode)
            ranks = [None] * ctx.world
            dist.all_gather_object(ranks, mine)  # every rank's readings, on every rank
            report["num_params"], report["param_shapes"] = mine["num_params"], mine["param_shapes"]
            report["modes"][mode] = {"ranks": [{k: v for k, v in r.items() if k != "param_shapes"}
                                               for r in ranks]}
            if ctx.is_main:
                print("\n".join(_table(report, mode)), flush=True)
        if ctx.is_main and args.out:
            write_json(args.out, report)


def main(argv: list[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run)


__all__ = ["MODES", "LaunchError", "local_breakdown", "local_numel", "measure", "shard"]

if __name__ == "__main__":
    sys.exit(main())
