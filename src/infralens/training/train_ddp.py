"""Lab 03: the Lab 02 loop as DistributedDataParallel training, one process per rank.

    torchrun --standalone --nproc-per-node 2 -m infralens.training.train_ddp          # 2 CPU ranks
    torchrun --standalone --nproc-per-node 2 -m infralens.training.train_ddp \\
        --device cuda --preset gpt2-1b --amp --batch 4 --seq-len 1024 --steps 20      # 2 GPUs

What changes from Lab 02, in the order a rank meets it:

1. ``init_distributed``: read the variables torchrun sets, pick NCCL on GPUs and gloo on CPUs,
   pin one GPU per process, join the process group.
2. The same model on every rank, wrapped in ``DistributedDataParallel``: the constructor
   broadcasts rank 0's weights, then groups the gradients into buckets (``bucket_cap_mb``)
   whose all-reduce starts, inside ``backward``, as soon as the bucket's last gradient is ready.
3. ``DistributedSampler``: each rank reads a different 1/W of every epoch.
4. Gradient accumulation: ``accum`` micro-batches per step; all but the last run under
   ``no_sync()``, so only the last backward communicates.
5. Rank 0 alone prints and saves the checkpoint; collectives (the loss average, the barrier
   after saving) are called by every rank.
6. ``destroy_process_group`` on the way out, also after an error.

Started without torchrun (the variables missing), or with bad input, it prints one line,
``infralens.training.train_ddp: error: <reason>``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

from infralens.models.gpt import GPT
from infralens.tools.checks import require_positive
from infralens.tools.cli import output_path, positive_float, positive_int, run_main, whole_file
from infralens.training.train_single_gpu import (
    TokenWindows,
    TrainConfig,
    config_from_args,
    markov_corpus,
)
from infralens.training.train_single_gpu import (
    build_parser as single_gpu_parser,
)

PROG = "infralens.training.train_ddp"
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(ValueError):
    """The process was not started the way DDP needs (torchrun, one GPU per rank)."""


@dataclass(frozen=True)
class DistContext:
    rank: int  # this process among all: 0 .. world - 1
    world: int  # processes in the job
    local_rank: int  # this process among those on its machine: picks the GPU
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0


# [ddp:init]
def init_distributed(device: str = "auto") -> DistContext:
    """Join the process group that torchrun set up; one GPU per process when on GPUs."""
    missing = [name for name in TORCHRUN_VARS if name not in os.environ]
    if missing:
        raise LaunchError(f"{', '.join(missing)} not set: start this under torchrun, e.g. "
                          f"torchrun --standalone --nproc-per-node 2 -m {PROG}")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        if local_rank >= torch.cuda.device_count():
            raise LaunchError(f"local rank {local_rank} has no GPU: "
                              f"{torch.cuda.device_count()} visible, one per process needed")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)  # before any CUDA work: NCCL uses the current device
        backend = "nccl"  # GPU-to-GPU over NVLink / the network
    else:
        dev, backend = torch.device("cpu"), "gloo"  # CPU tensors over TCP
    dist.init_process_group(backend)  # env://: MASTER_ADDR:MASTER_PORT, RANK, WORLD_SIZE
    return DistContext(rank, world, local_rank, dev, backend)
# [/ddp:init]


@contextmanager
def process_group(ctx: DistContext) -> Iterator[DistContext]:
    """A rank's work inside; ``destroy_process_group`` on the way out, also when a rank fails.

    On a normal exit every rank first waits at a barrier, so no rank tears its connections down
    while another still writes its results or has work in flight (with gloo, a peer that leaves
    early can abort a rank that is still finishing). A rank that fails skips the barrier; torchrun
    then stops the others."""
    try:
        yield ctx
        dist.barrier()
    finally:
        dist.destroy_process_group()


@dataclass(frozen=True)
class DDPConfig:
    """Lab 02's run (``train.batch`` is the micro-batch of one rank) plus what DDP adds."""

    train: TrainConfig
    accum: int = 2  # micro-batches per optimizer step
    bucket_cap_mb: float | None = None  # None: DDP's default (25 MiB, the first bucket 1 MiB)
    checkpoint_path: str | None = None
    log_every: int = 5

    def __post_init__(self) -> None:
        require_positive(accum=self.accum, log_every=self.log_every)
        if self.bucket_cap_mb is not None and not (math.isfinite(self.bucket_cap_mb)
                                                   and self.bucket_cap_mb > 0):
            raise ValueError(f"bucket_cap_mb must be a finite positive number, got {self.bucket_cap_mb}")

    def global_batch(self, world: int) -> int:
        """Sequences per optimizer step over all ranks."""
        return self.train.batch * self.accum * world


def wrap(model: torch.nn.Module, ctx: DistContext, bucket_cap_mb: float | None = None) -> DDP:
    """DDP around ``model``: broadcasts rank 0's weights and registers the bucket hooks."""
    # [ddp:wrap]
    return DDP(
        model,
        device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None,  # one GPU per rank
        bucket_cap_mb=bucket_cap_mb,  # bucket size in MiB; None: 25, and 1 for the first bucket
        gradient_as_bucket_view=True,  # .grad views the bucket: no second 4Ψ copy once synced
    )
    # [/ddp:wrap]


def sharded_loader(dataset: Dataset, ctx: DistContext, batch: int, seed: int,
                   shuffle: bool = True) -> tuple[DataLoader, DistributedSampler]:
    """A loader that gives this rank its own 1/W of every epoch (``drop_last`` keeps W even)."""
    # [ddp:sampler]
    sampler = DistributedSampler(dataset, num_replicas=ctx.world, rank=ctx.rank, shuffle=shuffle,
                                 seed=seed, drop_last=True)  # same permutation on every rank
    loader = DataLoader(dataset, batch_size=batch, sampler=sampler, drop_last=True)
    # [/ddp:sampler]
    if len(loader) == 0:
        raise ValueError(f"{len(dataset)} windows give rank {ctx.rank} no batch of {batch}")
    return loader, sampler


def epochs(loader: DataLoader, sampler: DistributedSampler) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Micro-batches forever; ``set_epoch`` makes each epoch's shuffle new, and equal on all ranks."""
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        yield from loader
        epoch += 1


def train_ddp(cfg: DDPConfig, ctx: DistContext, log: Callable[[str], None] = print) -> dict:
    """Train ``cfg.train.steps`` optimizer steps; returns rank-local facts (losses on rank 0)."""
    tc = cfg.train
    tc.check_data(ctx.world)  # every rank gets a batch: before the model is built
    torch.manual_seed(tc.seed)  # the same initial weights everywhere (DDP broadcasts rank 0's anyway)
    with ctx.device:
        model = GPT(tc.model, checkpoint=tc.checkpoint)
    ddp = wrap(model, ctx, cfg.bucket_cap_mb)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=tc.lr, weight_decay=tc.weight_decay)
    dataset = TokenWindows(markov_corpus(tc.corpus_tokens, tc.model.vocab_size, tc.branching, tc.seed),
                           tc.seq_len)
    loader, sampler = sharded_loader(dataset, ctx, tc.batch, tc.seed)
    data = epochs(loader, sampler)
    autocast = torch.autocast(ctx.device.type, dtype=torch.bfloat16, enabled=tc.amp)
    if ctx.is_main:
        log(f"{ctx.world} ranks ({ctx.backend}), {model.num_params():,} parameters; global batch "
            f"{cfg.global_batch(ctx.world)} = {tc.batch} per micro-batch x {cfg.accum} micro-batches "
            f"x {ctx.world} ranks; {len(loader)} micro-batches per rank per epoch")
    losses = []
    start = time.perf_counter()
    # [ddp:loop]
    for step in range(tc.steps):
        step_loss = torch.zeros((), device=ctx.device)
        for micro in range(cfg.accum):
            x, y = (t.to(ctx.device, non_blocking=True) for t in next(data))  # (B, T) each
            sync = micro == cfg.accum - 1  # communicate only on the last micro-batch
            with nullcontext() if sync else ddp.no_sync():  # forward and backward inside
                with autocast:
                    loss = ddp(x, y)[1]  # the (B, T, V) logits are not kept
                (loss / cfg.accum).backward()  # the synced one all-reduces bucket by bucket
            step_loss += loss.detach() / cfg.accum
        optimizer.step()  # every rank applies the same averaged gradient: replicas stay equal
        optimizer.zero_grad(set_to_none=True)
        if step % cfg.log_every == 0 or step == tc.steps - 1:
            dist.all_reduce(step_loss)  # a collective: every rank must call it, not just rank 0
            if ctx.is_main:
                losses.append(step_loss.item() / ctx.world)
                log(f"step {step:4d}  loss {losses[-1]:.4f}  (mean over {ctx.world} ranks)")
    # [/ddp:loop]
    seconds = time.perf_counter() - start
    # [ddp:checkpoint]
    if cfg.checkpoint_path:
        if ctx.is_main:  # one writer; ddp.module is the plain model, keys without "module."
            with whole_file(cfg.checkpoint_path) as tmp:  # renamed into place once complete
                torch.save({"model": ddp.module.state_dict(), "optimizer": optimizer.state_dict(),
                            "step": tc.steps}, tmp)
            log(f"rank 0 saved {cfg.checkpoint_path}")
        dist.barrier()  # nobody reads the file, or exits, before it is complete
    # [/ddp:checkpoint]
    return {"losses": losses, "seconds": seconds, "micro_batches_per_epoch": len(loader)}


def build_parser() -> argparse.ArgumentParser:
    parser = single_gpu_parser()  # Lab 02's flags; --batch is the micro-batch of one rank
    parser.prog = f"torchrun --nproc-per-node N -m {PROG}"
    parser.description = "Lab 02's loop under DistributedDataParallel (launch with torchrun)."
    parser.epilog = f"Bad input or a missing torchrun variable prints one line, '{PROG}: error: ...'."
    parser.set_defaults(steps=10, log_every=5, device="auto")
    parser.add_argument("--accum", type=positive_int, default=2, help="micro-batches per step (default 2)")
    parser.add_argument("--bucket-cap-mb", type=positive_float,
                        help="DDP bucket size, MiB (default: DDP's, 25)")
    parser.add_argument("--save", metavar="PATH", type=output_path,
                        help="rank 0 saves a checkpoint here at the end")
    return parser


def rank_config(args: argparse.Namespace) -> tuple[TrainConfig, str]:
    """Lab 02's config from the parsed flags, and the ``--device`` (auto, cpu or cuda) that
    :func:`init_distributed` takes: a rank's own device comes from there, not from the flags."""
    device = args.device
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    args.device = "cpu"  # Lab 02's config checks; the rank's device comes from init_distributed
    return config_from_args(args), device


def launch_world() -> int:
    """The ranks torchrun started (``WORLD_SIZE``; 1 outside torchrun), read before joining the
    group, so that input which depends on it is checked before any rank starts work."""
    text = os.environ.get("WORLD_SIZE", "1")
    if not text.isdigit() or int(text) < 1:
        raise LaunchError(f"WORLD_SIZE={text!r}: expected a positive number of ranks")
    return int(text)


def _prepare(argv: Sequence[str] | None) -> tuple[DDPConfig, DistContext]:
    args = build_parser().parse_args(argv)
    train, device = rank_config(args)
    cfg = DDPConfig(train, accum=args.accum, bucket_cap_mb=args.bucket_cap_mb,
                    checkpoint_path=args.save, log_every=args.log_every)
    train.check_data(launch_world())  # each rank's 1/W of the windows holds a batch
    return cfg, init_distributed(device)  # last: nothing after it may fail on the input


def _run(prepared: tuple[DDPConfig, DistContext]) -> None:
    cfg, ctx = prepared
    with process_group(ctx):
        train_ddp(cfg, ctx)


def main(argv: list[str] | None = None) -> int:
    """Run one rank; returns the exit status (0, or 2 for bad input or a bad launch)."""
    return run_main(PROG, argv, _prepare, _run)


if __name__ == "__main__":
    sys.exit(main())
