"""Megatron-LM's tensor parallelism, written out for one GPT block (Shoeybi et al. 2019).

Two matrix products in a row, ``Y = GELU(X A) B``, split without communication in between if
``A`` is split by *columns* and ``B`` by *rows*: GPU ``i`` holds ``A_i`` (``h x f/t``) and ``B_i``
(``f/t x h``), computes ``GELU(X A_i) B_i`` on its own (GELU is elementwise, so it commutes with
a column split), and one all-reduce sums the ``t`` partial products into ``Y``. Attention splits
the same way, by heads: the Q, K and V projections by columns (each GPU gets ``a/t`` whole
heads), the output projection by rows.

Two conjugate operators carry the communication (the paper's ``f`` and ``g``):

* :class:`CopyToTensorParallel` (``f``): identity forward; all-reduce of the gradient backward,
  because every GPU's branch contributed to ``dL/dX``;
* :class:`ReduceFromTensorParallel` (``g``): all-reduce forward; identity backward.

Per block, forward: two all-reduces (attention, MLP) of ``b·s·h`` values; backward: two more.
Every call is logged in :data:`TRAFFIC`, so a test can hold the count against
:func:`~infralens.parallel.collectives.collective_bytes`.
"""

from __future__ import annotations

import copy

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from infralens.models.gpt import Block

__all__ = ["TRAFFIC", "CopyToTensorParallel", "ReduceFromTensorParallel", "TensorParallelBlock"]

#: Every all-reduce the operators ran on this process: (direction, elements, bytes of the tensor).
TRAFFIC: list[tuple[str, int, int]] = []
#: Set False to skip the all-reduces (the results are then wrong): how a timing run measures the
#: share of a step that communication takes.
COMMUNICATE = [True]


def _all_reduce(x: torch.Tensor, group, direction: str) -> torch.Tensor:
    TRAFFIC.append((direction, x.numel(), x.numel() * x.element_size()))
    x = x.contiguous()
    if COMMUNICATE[0]:
        dist.all_reduce(x, group=group)
    return x


# [parallel:tp-operators]
class CopyToTensorParallel(torch.autograd.Function):
    """``f``: forward identity, backward all-reduce (every branch used the same input)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad.clone(), ctx.group, "backward"), None


class ReduceFromTensorParallel(torch.autograd.Function):
    """``g``: forward all-reduce (sum the partial products), backward identity."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x.clone(), group, "forward")

    @staticmethod
    def backward(ctx, grad):
        return grad, None
# [/parallel:tp-operators]


class TensorParallelBlock(nn.Module):
    """One GPT :class:`~infralens.models.gpt.Block` split over the ``world`` ranks of ``group``;
    rank ``rank`` takes its shards of ``block``'s weights (so the two compute the same function)."""

    def __init__(self, block: Block, rank: int, world: int, group=None) -> None:
        super().__init__()
        h = block.ln1.normalized_shape[0]
        a = block.attn.n_heads
        if a % world or block.mlp.fc.out_features % world:
            raise ValueError(f"tensor-parallel size {world} must divide heads ({a}) and d_ff")
        self.group, self.heads = group, a // world
        d = h // a
        self.ln1, self.ln2 = copy.deepcopy(block.ln1), copy.deepcopy(block.ln2)  # replicated
        # [parallel:tp-shards]
        q, k, v = block.attn.qkv.weight.detach().split(h, dim=0)  # each (h, h), rows = heads x d
        rows = slice(rank * self.heads * d, (rank + 1) * self.heads * d)  # this rank's heads
        self.qkv_w = nn.Parameter(torch.cat([q[rows], k[rows], v[rows]]))  # column-parallel
        qb, kb, vb = block.attn.qkv.bias.detach().split(h)
        self.qkv_b = nn.Parameter(torch.cat([qb[rows], kb[rows], vb[rows]]))
        self.proj_w = nn.Parameter(block.attn.proj.weight.detach()[:, rows].clone())  # row-parallel
        self.proj_b = nn.Parameter(block.attn.proj.bias.detach().clone())  # added once, after g
        f = block.mlp.fc.out_features // world
        cols = slice(rank * f, (rank + 1) * f)
        self.fc_w = nn.Parameter(block.mlp.fc.weight.detach()[cols].clone())  # column-parallel
        self.fc_b = nn.Parameter(block.mlp.fc.bias.detach()[cols].clone())
        self.out_w = nn.Parameter(block.mlp.proj.weight.detach()[:, cols].clone())  # row-parallel
        self.out_b = nn.Parameter(block.mlp.proj.bias.detach().clone())
        # [/parallel:tp-shards]

    # [parallel:tp-forward]
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, _ = x.shape
        y = CopyToTensorParallel.apply(self.ln1(x), self.group)  # f
        q, k, v = F.linear(y, self.qkv_w, self.qkv_b).chunk(3, dim=-1)  # (B, T, h/t) each
        q, k, v = (z.view(B, T, self.heads, -1).transpose(1, 2) for z in (q, k, v))  # local heads
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, -1)
        x = x + ReduceFromTensorParallel.apply(F.linear(z, self.proj_w), self.group) + self.proj_b  # g
        y = CopyToTensorParallel.apply(self.ln2(x), self.group)  # f
        u = F.gelu(F.linear(y, self.fc_w, self.fc_b), approximate="tanh")  # (B, T, f/t)
        return x + ReduceFromTensorParallel.apply(F.linear(u, self.out_w), self.group) + self.out_b  # g
    # [/parallel:tp-forward]
