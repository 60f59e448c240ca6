"""Run-to-run and batch-size (in)variance: does the same computation give the same bits?

Floating-point addition is not associative, so any kernel whose order of additions can change
between runs (atomic adds, whose order is the order threads arrive in) or between calls with
different shapes (a library that picks a different tiling or split of K for a different batch
size) can return different bits for the same mathematical result
{cite}`pytorch2025reproducibility,he2025defeating`.

* :func:`distinct_results`: how many different bit patterns ``runs`` calls of a function give.
* :func:`atomic_add_patterns`: ``index_add_`` (atomics on CUDA) with deterministic algorithms off
  and on, and ``torch.sum`` and a matmul for contrast.
* :func:`batch_invariance`: one row of ``x @ W`` computed alone and inside batches of M rows.
"""

from __future__ import annotations

import hashlib

import torch

__all__ = ["distinct_results", "atomic_add_patterns", "batch_invariance"]


def _digest(t: torch.Tensor) -> str:
    raw = t.detach().reshape(-1).contiguous().cpu().view(torch.uint8).numpy()
    return hashlib.sha1(raw.tobytes()).hexdigest()


def distinct_results(fn, runs: int = 20) -> int:
    """The number of distinct bit patterns among ``runs`` results of ``fn()``."""
    return len({_digest(fn()) for _ in range(runs)})


# [numerics:atomic-add-patterns]
def atomic_add_patterns(n: int = 1 << 22, bins: int = 1024, runs: int = 20, device: str = "cuda",
                        seed: int = 0) -> dict:
    """Distinct results over ``runs`` identical calls of four reductions of the same data."""
    gen = torch.Generator(device=device).manual_seed(seed)
    src = torch.randn(n, device=device, generator=gen)
    idx = torch.randint(0, bins, (n,), device=device, generator=gen)
    a = torch.randn(2048, 2048, device=device, generator=gen, dtype=torch.bfloat16)

    def index_add():
        return torch.zeros(bins, device=device).index_add_(0, idx, src)

    out = {"n": n, "bins": bins, "runs": runs,
           "index_add": distinct_results(index_add, runs),
           "sum": distinct_results(lambda: src.sum(), runs),
           "matmul_bf16": distinct_results(lambda: a @ a, runs)}
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        out["index_add_deterministic"] = distinct_results(index_add, runs)
    except RuntimeError as err:
        out["index_add_deterministic"] = f"RuntimeError: {str(err).splitlines()[0][:160]}"
    finally:
        torch.use_deterministic_algorithms(was)
    return out
# [/numerics:atomic-add-patterns]


# [numerics:batch-invariance]
def batch_invariance(k: int = 4096, n: int = 4096, batches=(1, 8, 64, 512, 2048),
                     dtype=torch.bfloat16, device: str = "cuda", seed: int = 0) -> dict:
    """Row 0 of x[:M] @ W for each M, against row 0 computed alone (M = 1): the fraction of its
    n outputs whose bits differ and the largest relative difference."""
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(max(batches), k, device=device, generator=gen).to(dtype)
    w = torch.randn(k, n, device=device, generator=gen).to(dtype)
    alone = x[:1] @ w
    rows = []
    for m in batches:
        row = (x[:m] @ w)[:1]
        differ = (row != alone).float().mean().item()
        rel = ((row.double() - alone.double()).abs() / alone.double().abs().clamp_min(1e-30)).max()
        rows.append({"m": m, "differ": differ, "max_rel": rel.item()})
    return {"k": k, "n": n, "dtype": str(dtype).replace("torch.", ""), "rows": rows}
# [/numerics:batch-invariance]
