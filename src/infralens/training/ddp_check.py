"""Lab 03's proof: DDP's gradients are one process's gradients on the same global batch.

    torchrun --standalone --nproc-per-node 2 -m infralens.training.ddp_check --out grads.pt

A tiny GPT in float64 (no dropout), data from ``DistributedSampler`` without shuffling, so the
global batch is known: the first ``world x batch`` windows. Every rank starts from *different*
weights (seed + rank), to show that DDP's constructor broadcasts rank 0's. Then two backward
passes over the same global batch:

* ``plain``: one micro-batch of ``batch`` windows per rank, synchronized;
* ``accum``: two micro-batches of ``batch / 2``, the first under ``no_sync()``.

Rank 0 saves both flat gradients, how far apart the ranks' gradients are after the
``no_sync`` backward (apart: nothing was communicated) and after the synchronized one (equal),
and the window indices each rank read. :func:`single_process_gradients` computes the
reference: one process, one model with rank 0's weights, the whole global batch.
"""

from __future__ import annotations

import sys
from contextlib import nullcontext

import torch
import torch.distributed as dist

from infralens.models.gpt import GPT, GPTConfig
from infralens.tools.cli import OneLineParser, UsageError, output_path, run_main, whole_file
from infralens.training.train_ddp import (
    DistContext,
    LaunchError,
    init_distributed,
    process_group,
    sharded_loader,
    wrap,
)
from infralens.training.train_single_gpu import TokenWindows, markov_corpus

PROG = "infralens.training.ddp_check"
MODEL = GPTConfig(vocab_size=64, n_positions=16, d_model=32, n_layers=2, n_heads=4)
SEQ_LEN, BATCH, SEED = 16, 4, 0  # BATCH windows per rank per step


def dataset() -> TokenWindows:
    return TokenWindows(markov_corpus(64 * (SEQ_LEN + 1), MODEL.vocab_size, seed=SEED), SEQ_LEN)


def flat_grads(model: torch.nn.Module) -> torch.Tensor:
    """Every parameter's gradient, in ``named_parameters`` order, as one float64 vector."""
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def single_process_gradients(indices: list[int]) -> torch.Tensor:
    """The reference: rank 0's initial weights, the mean loss over ``indices``, one backward."""
    torch.manual_seed(SEED)
    model = GPT(MODEL).double()
    data = dataset()
    x = torch.stack([data[i][0] for i in indices])  # (W * B, T)
    y = torch.stack([data[i][1] for i in indices])  # (W * B, T)
    loss = model(x, y)[1]  # mean over all W * B * T tokens
    loss.backward()
    return flat_grads(model)


def _spread(grads: torch.Tensor) -> float:
    """Largest difference between this rank's vector and any other rank's (every rank calls it)."""
    everyone = [torch.empty_like(grads) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, grads)
    return max(float((g - grads).abs().max()) for g in everyone)


def run(out: str, ctx: DistContext) -> None:
    """The two backward passes on this rank (joined as ``ctx``); rank 0 saves to ``out``."""
    with process_group(ctx):
        torch.manual_seed(SEED + ctx.rank)  # a different start on every rank ...
        model = GPT(MODEL).double()
        ddp = wrap(model, ctx)  # ... until DDP broadcasts rank 0's weights here
        data = dataset()
        results: dict = {"world": ctx.world, "batch": BATCH}

        # plain: one synchronized backward of BATCH windows per rank
        loader, sampler = sharded_loader(data, ctx, BATCH, SEED, shuffle=False)
        indices = list(sampler)[:BATCH]  # what this rank reads in its first batch
        x, y = next(iter(loader))
        loss = ddp(x, y)[1]
        loss.backward()
        results["plain"] = flat_grads(ddp.module).clone()
        ddp.zero_grad(set_to_none=True)

        # accum: the same windows as two micro-batches; the first backward under no_sync
        loader, _ = sharded_loader(data, ctx, BATCH // 2, SEED, shuffle=False)
        micro = iter(loader)
        for k in range(2):
            x, y = next(micro)
            with ddp.no_sync() if k == 0 else nullcontext():
                loss = ddp(x, y)[1]
                (loss / 2).backward()
            spread = _spread(flat_grads(ddp.module))
            results["spread_after_no_sync" if k == 0 else "spread_after_sync"] = spread
        results["accum"] = flat_grads(ddp.module).clone()

        all_indices = [None] * ctx.world
        dist.all_gather_object(all_indices, indices)
        results["indices"] = all_indices
        if ctx.is_main:
            with whole_file(out) as tmp:  # renamed into place once complete
                torch.save(results, tmp)
            print(f"{ctx.world} ranks, windows per rank {all_indices}; "
                  f"{results['plain'].numel():,} gradient entries (float64)")
            print(f"after the no_sync backward, ranks differ by up to {results['spread_after_no_sync']:.3e}; "
                  f"after the synchronized one by {results['spread_after_sync']:.3e}")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=f"torchrun --nproc-per-node N -m {PROG}",
                            description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=output_path,
                        help="where rank 0 saves the gradients (torch.save)")
    return run_main(PROG, argv, lambda a: (parser.parse_args(a).out, init_distributed("cpu")),
                    lambda prepared: run(*prepared), errors=(UsageError, LaunchError))


if __name__ == "__main__":
    sys.exit(main())
