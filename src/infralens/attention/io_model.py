"""Elements moved between HBM and on-chip memory by naive attention and by FlashAttention.

:func:`naive_hbm_elements` and :func:`flash_hbm_elements` count, as closed forms, what the loops
of :mod:`~infralens.attention.reference` and :mod:`~infralens.attention.flash_reference` move
when nothing stays in a cache between loads (an :class:`IOCount` passed to those functions
checks the closed forms); :func:`paper_block_sizes` picks block sizes from the on-chip memory
size as the FlashAttention paper does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["IOCount", "naive_hbm_elements", "flash_hbm_elements", "paper_block_sizes",
           "compulsory_hbm_elements"]


@dataclass
class IOCount:
    """Elements read from and written to HBM, tallied by the functions that accept one."""

    reads: int = 0
    writes: int = 0

    def read(self, *tensors: torch.Tensor) -> None:
        self.reads += sum(t.numel() for t in tensors)

    def write(self, *tensors: torch.Tensor) -> None:
        self.writes += sum(t.numel() for t in tensors)

    @property
    def total(self) -> int:
        return self.reads + self.writes


# [attention:io-model]
def naive_hbm_elements(S: int, d: int) -> int:
    """Elements :func:`naive_attention` moves per head: Q, K, V and O once, S x S four times."""
    return 4 * S * d + 4 * S * S  # read 3Sd + 2S^2, write Sd + 2S^2


def flash_hbm_elements(S: int, d: int, *, block_m: int, block_n: int, causal: bool = False,
                       order: str = "fa2") -> int:
    """Elements the tiled forward moves per head, loop by loop (no cache between HBM and SRAM).

    ``order="fa2"`` is :func:`flash_attention_forward`: Q and O once, K and V once per query
    block. ``order="fa1"`` is :func:`flash_attention_forward_paper`: K and V once, Q, O, l and m
    once per key/value block (``block_m``, ``block_n`` are then the paper's B_r, B_c).
    """
    total = 0
    if order == "fa2":
        for i0 in range(0, S, block_m):
            rows = min(block_m, S - i0)
            keys = min(S, i0 + rows) if causal else S  # keys this query block visits ...
            visited = math.ceil(keys / block_n) * block_n  # ... in whole blocks
            visited = min(visited, S)
            total += rows * d + 2 * visited * d + rows * d + rows  # Q_i; K_j, V_j; O_i, lse_i
        return total
    if order == "fa1":
        total = S * d + 2 * S  # O, l, m initialized in HBM
        for j0 in range(0, S, block_n):
            cols = min(block_n, S - j0)
            total += 2 * cols * d  # K_j, V_j
            first = (j0 // block_m * block_m) if causal else 0
            rows = S - first  # query rows visited for this key block
            total += 3 * rows * d + 4 * rows  # read Q_i, O_i, l_i, m_i; write O_i, l_i, m_i
        return total
    raise ValueError(f"order must be 'fa1' or 'fa2', not {order!r}")


def paper_block_sizes(sram_bytes: int, d: int, elem_bytes: int = 2) -> tuple[int, int]:
    """(B_r, B_c) of the paper's Algorithm 1 for an on-chip memory of M = sram_bytes / elem_bytes
    elements: B_c = ceil(M / 4d) so that K_j, V_j, Q_i and O_i fit, and B_r = min(B_c, d)."""
    M = sram_bytes // elem_bytes
    block_c = math.ceil(M / (4 * d))
    return min(block_c, d), block_c
# [/attention:io-model]


def compulsory_hbm_elements(S: int, d: int) -> int:
    """The least any forward pass moves per head: read Q, K and V once, write O once (4 S d).
    The IO model's counts minus this are re-reads, and a cache can serve re-reads."""
    return 4 * S * d
