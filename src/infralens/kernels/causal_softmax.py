"""Causal softmax of attention scores, mask and normalization fused into one streaming kernel.

Scores ``(..., n_q, n_k)`` of ``n_q`` queries that follow ``n_k - n_q`` earlier keys (the
bottom-right alignment of :mod:`infralens.attention.masks`): query ``i`` sees keys
``0 .. i + n_k - n_q``. Eager PyTorch (:func:`causal_softmax_eager`) builds the mask, writes a
masked copy of the scores and runs ``softmax`` over it: the scores cross HBM three times and the
hidden half is read like the rest. :func:`causal_softmax_kernel` computes each row's visible
length from its index, streams only the visible keys through the online max and sum of
:func:`~infralens.kernels.triton_softmax.online_max_sum`, and writes the whole row once, zeros
past the diagonal. :func:`causal_softmax_bytes` counts both; :func:`profile_causal_softmax`
measures them with Nsight Compute.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infralens.attention.masks import visible
from infralens.kernels.triton_softmax import online_max_sum, row_num_warps

__all__ = ["causal_softmax_eager", "visible_keys", "causal_softmax_bytes", "causal_softmax_kernel",
           "causal_softmax", "CHECK_SHAPES", "causal_softmax_errors", "SOFTMAX_SHAPES",
           "measure_causal_softmax", "profile_causal_softmax", "BLOCK_N_MAX"]

#: Columns a program streams at a time.
BLOCK_N_MAX: int = 1024


# [causal-softmax:eager]
def causal_softmax_eager(scores: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of ``scores`` with the bottom-right causal mask, in
    PyTorch ops (R rows of n_k scores; the mask is n_q x n_k booleans, one byte each, broadcast
    over the R / n_q blocks of queries)."""
    n_q, n_k = scores.shape[-2:]
    seen = visible(torch.arange(n_q, device=scores.device) + (n_k - n_q),
                   torch.arange(n_k, device=scores.device))  # write n_q n_k
    masked = torch.where(seen, scores, float("-inf"))  # read R n_k + R n_k / e, write R n_k
    return torch.softmax(masked, dim=-1)  # read R n_k, write R n_k
# [/causal-softmax:eager]


def visible_keys(n_q: int, n_k: int) -> int:
    """Scores a block of ``n_q`` queries may see among ``n_k`` keys: query i sees i + n_k - n_q + 1."""
    if not 0 < n_q <= n_k:
        raise ValueError(f"n_q {n_q}, n_k {n_k}: need 0 < n_q <= n_k")
    return n_q * (n_k - n_q + 1) + n_q * (n_q - 1) // 2


# [causal-softmax:bytes]
def causal_softmax_bytes(rows: int, n_q: int, n_k: int, elem_bytes: int) -> dict[str, int]:
    """HBM bytes of the causal softmax of ``rows`` rows (``rows / n_q`` query blocks), from the
    counts above: eager (the mask written once and read again for every block of queries, as
    the scores streaming through L2 evict it; each row read once by ``softmax``), and fused (the
    visible scores read once, every output written once)."""
    if rows % n_q:
        raise ValueError(f"rows {rows} is not a whole number of {n_q}-query blocks")
    scores = rows * n_k * elem_bytes
    mask = n_q * n_k  # one byte per bool
    eager = mask + (scores + rows // n_q * mask + scores) + (scores + scores)
    fused = rows // n_q * visible_keys(n_q, n_k) * elem_bytes + scores
    return {"eager": eager, "fused": fused, "scores": scores}
# [/causal-softmax:bytes]


# [causal-softmax:kernel]
@triton.jit
def causal_softmax_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_q, n_k, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    seen = row % n_q + (n_k - n_q) + 1  # keys 0 .. seen - 1 are visible to this query
    row_max, row_sum = online_max_sum(x_row, seen, BLOCK_N)  # pass 1: the visible keys only
    cols = tl.arange(0, BLOCK_N)
    for start in range(0, n_k, BLOCK_N):  # pass 2: the whole row, zeros past the diagonal
        x = tl.load(x_row + start + cols, mask=start + cols < seen, other=-float("inf"))
        y = tl.exp(x.to(tl.float32) - row_max) / row_sum  # exp(-inf) = 0 where hidden
        tl.store(y_row + start + cols, y, mask=start + cols < n_k)
# [/causal-softmax:kernel]


def causal_softmax(scores: torch.Tensor, *, block_n: int = BLOCK_N_MAX) -> torch.Tensor:
    """:func:`causal_softmax_kernel` over ``scores`` (..., n_q, n_k), contiguous, n_q <= n_k."""
    if scores.dim() < 2 or not 0 < scores.shape[-2] <= scores.shape[-1]:
        raise ValueError(f"scores {tuple(scores.shape)}: need (..., n_q, n_k) with 0 < n_q <= n_k")
    if not scores.is_contiguous():
        raise ValueError("scores must be contiguous")
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n {block_n}: must be a power of two, at least 16")
    n_q, n_k = scores.shape[-2:]
    x = scores.reshape(-1, n_k)
    y = torch.empty_like(x)
    block = min(block_n, triton.next_power_of_2(n_k))
    causal_softmax_kernel[(x.shape[0],)](x, y, x.stride(0), y.stride(0), n_q, n_k, BLOCK_N=block,
                                         num_warps=row_num_warps(block, x.element_size()))
    return y.view(scores.shape)


#: (batch x heads, n_q, n_k) the kernel is checked on: one query, a square block, a block after a
#: prefix, widths that are not multiples of the block.
CHECK_SHAPES: list[tuple[int, int, int]] = [(3, 1, 37), (2, 45, 45), (2, 29, 70), (1, 5, 300)]
#: (batch x heads, n_q, n_k) of the benchmark: prefill of a 4,096- and an 8,192-token sequence.
SOFTMAX_SHAPES: list[tuple[int, int, int]] = [(16, 4096, 4096), (4, 8192, 8192)]


def causal_softmax_errors(device: str = "cpu", shapes=None, block_n: int = 32) -> list[dict]:
    """Largest absolute error of the kernel (and of eager PyTorch, in the same dtype) against a
    float64 evaluation, for float32 and bfloat16 scores at every shape of :data:`CHECK_SHAPES`."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for bh, n_q, n_k in shapes or CHECK_SHAPES:
        base = 4 * torch.randn(bh, n_q, n_k, generator=gen)
        for dtype in (torch.float32, torch.bfloat16):
            x = base.to(device, dtype)
            ref = causal_softmax_eager(x.double())
            got = causal_softmax(x, block_n=block_n).double()
            rows.append({"shape": [bh, n_q, n_k], "dtype": str(dtype).removeprefix("torch."),
                         "fused": (got - ref).abs().max().item(),
                         "eager": (causal_softmax_eager(x).double() - ref).abs().max().item(),
                         "hidden_nonzero": int((got != 0)[..., ~visible(torch.arange(n_q) + n_k - n_q,
                                                                         torch.arange(n_k))].sum())})
    return rows


# [causal-softmax:measure]
def measure_causal_softmax(shapes=None, device: str = "cuda") -> dict:
    """Times of eager PyTorch, ``torch.compile`` of it and the fused kernel on bf16 scores, with a
    device copy of the scores for scale, in one run; errors against float64 on the first rows."""
    from functools import partial

    from infralens.tools.bench import bench

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: the causal softmax benchmark needs a GPU")
    variants = {"eager": causal_softmax_eager, "compiled": torch.compile(causal_softmax_eager),
                "fused": causal_softmax}
    out = {"device": torch.cuda.get_device_name(), "dtype": "bfloat16", "shapes": []}
    for bh, n_q, n_k in shapes or SOFTMAX_SHAPES:
        gen = torch.Generator(device=device).manual_seed(0)
        x = (4 * torch.randn(bh, n_q, n_k, device=device, generator=gen)).to(torch.bfloat16)
        ref = causal_softmax_eager(x[:1].double())
        copy = torch.empty_like(x)
        row = {"shape": [bh, n_q, n_k], "bytes": causal_softmax_bytes(bh * n_q, n_q, n_k, 2),
               "copy": bench(partial(copy.copy_, x)), "times": {}, "err": {}}
        for name, fn in variants.items():
            row["err"][name] = (fn(x)[:1].double() - ref).abs().max().item()
            row["times"][name] = bench(partial(fn, x))
        out["shapes"].append(row)
    out["checks"] = causal_softmax_errors(device, block_n=BLOCK_N_MAX)
    return out
# [/causal-softmax:measure]


def _drive(variant: str, bh: int, n_q: int, n_k: int) -> None:
    """One steady-state call of ``variant`` in the profiled region."""
    from infralens.tools.ncu import warm_then_region

    fn = {"eager": causal_softmax_eager, "fused": causal_softmax}[variant]
    x = (4 * torch.randn(bh, n_q, n_k, device="cuda")).to(torch.bfloat16)
    warm_then_region(lambda: fn(x))


def profile_causal_softmax(bh: int, n_q: int, n_k: int, variants=("eager", "fused")) -> dict:
    """Every kernel launch of one call of each variant under Nsight Compute, with
    :func:`causal_softmax_bytes`'s prediction."""
    from infralens.tools.ncu import profile_variants

    res = profile_variants(f"{__name__}:_drive", variants, (bh, n_q, n_k))
    return {"shape": [bh, n_q, n_k], "model": causal_softmax_bytes(bh * n_q, n_q, n_k, 2), **res}
