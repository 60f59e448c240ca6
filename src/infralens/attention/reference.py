"""Attention as the formula writes it: the S x S scores and probabilities, materialized.

:func:`naive_attention` is the reference every other attention in the book is checked against
(in float64), and the baseline whose HBM traffic FlashAttention removes: it writes the scores
and the probabilities to memory and reads them back (an :class:`~infralens.attention.io_model.IOCount`
passed in tallies those elements). Shapes: ``q``, ``k``, ``v`` are ``(..., S, d)``.
"""

from __future__ import annotations

import torch

from infralens.attention.io_model import IOCount
from infralens.attention.masks import visible

__all__ = ["softmax_scale", "naive_attention"]


def softmax_scale(q: torch.Tensor, scale: float | None = None) -> float:
    """The scale of the scores: ``1/sqrt(d)`` unless one is given."""
    return q.shape[-1] ** -0.5 if scale is None else scale


# [attention:naive]
def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    scale: float | None = None, io: IOCount | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v with the S x S matrices in memory (the paper's Algorithm 0)."""
    io = IOCount() if io is None else io
    S = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * softmax_scale(q, scale)  # (..., S, S)
    if causal:
        idx = torch.arange(S, device=q.device)
        scores = scores.masked_fill(~visible(idx, idx), float("-inf"))
    io.read(q, k), io.write(scores)  # step 1: read Q, K; write S (scale and mask folded in)
    probs = torch.softmax(scores, dim=-1)  # (..., S, S)
    io.read(scores), io.write(probs)  # step 2: read S; write P
    out = probs @ v  # (..., S, d)
    io.read(probs, v), io.write(out)  # step 3: read P, V; write O
    return out
# [/attention:naive]


