"""Online softmax: a softmax's max and normalizer in one pass over its inputs.

:func:`online_softmax_one` reads one element at a time and :func:`online_softmax_blocks` one
block at a time, rescaling what they have summed so far whenever the max grows;
:func:`merge_states` is the rule that combines two partial results. FlashAttention's inner loop,
split-KV decoding and ring attention are all this merge.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch

__all__ = ["SoftmaxState", "online_softmax_one", "merge_states", "online_softmax_blocks",
           "online_softmax"]


@dataclass(frozen=True)
class SoftmaxState:
    """What one pass over some scores leaves: their max m and l = sum(exp(x - m))."""

    m: float
    l: float


# [attention:online-one]
def online_softmax_one(xs: Iterable[float]) -> SoftmaxState:
    """Max and normalizer of ``xs`` in one pass, one element at a time (finite inputs)."""
    m, l = -math.inf, 0.0  # the state of an empty sequence
    for x in xs:
        m_new = max(m, x)
        l = l * math.exp(m - m_new) + math.exp(x - m_new)  # rescale the old sum to the new max
        m = m_new
    return SoftmaxState(m, l)
# [/attention:online-one]


# [attention:merge]
def merge_states(a: SoftmaxState, b: SoftmaxState) -> SoftmaxState:
    """The state of the concatenation of two sequences, from the states of each."""
    m = max(a.m, b.m)
    return SoftmaxState(m, a.l * math.exp(a.m - m) + b.l * math.exp(b.m - m))


def online_softmax_blocks(x: torch.Tensor, block: int) -> SoftmaxState:
    """Max and normalizer of a 1-D ``x`` in one pass, ``block`` elements at a time."""
    state = SoftmaxState(-math.inf, 0.0)
    for start in range(0, x.numel(), block):
        blk = x[start:start + block]  # (block,) the last one may be shorter
        m_blk = blk.max().item()  # the block's own max and normalizer ...
        local = SoftmaxState(m_blk, torch.exp(blk - m_blk).sum().item())
        state = merge_states(state, local)  # ... merged into the running state
    return state
# [/attention:merge]


def online_softmax(x: torch.Tensor, block: int | None = None) -> torch.Tensor:
    """softmax of a 1-D ``x`` from one online pass (element by element, or by blocks) plus a
    second pass that normalizes: exp(x - m) / l."""
    state = online_softmax_one(x.tolist()) if block is None else online_softmax_blocks(x, block)
    return torch.exp(x - state.m) / state.l


