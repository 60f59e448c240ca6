"""Which keys a query may see, and ALiBi's distance penalty.

Every mask here is a boolean (s_q, s_k) tensor, True where query row i may attend to key column
j. Positions are *absolute*: a query block of ``s_q`` tokens that comes after ``s_k - s_q``
cached tokens has absolute positions ``s_k - s_q .. s_k - 1``. That is the "bottom-right"
alignment decoding and chunked prefill need; SDPA's ``is_causal=True`` is "top-left" aligned
when ``s_q != s_k`` (its reference implementation builds ``ones(L, S).tril()``), so a single
decoding query would see only the first key.
"""

from __future__ import annotations

from typing import Literal

import torch


# [attention:masks]
def visible(query_pos: torch.Tensor, key_pos: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """(len(query_pos), len(key_pos)): True where a query may see a key, by absolute position."""
    i, j = query_pos[:, None], key_pos[None, :]
    seen = j <= i  # never a key from the future
    if window is not None:
        seen &= j > i - window  # only the last `window` keys, the query's own included
    return seen


def causal_mask(s_q: int, s_k: int, align: Literal["bottom-right", "top-left"] = "bottom-right",
                window: int | None = None) -> torch.Tensor:
    """Causal (optionally sliding-window) visibility of s_k keys from s_q queries."""
    offset = s_k - s_q if align == "bottom-right" else 0  # absolute position of query row 0
    return visible(torch.arange(s_q) + offset, torch.arange(s_k), window)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's per-head slopes for a power-of-two head count: 2^(-8/n), 2^(-16/n), ..., 2^(-8)."""
    if n_heads <= 0 or n_heads & (n_heads - 1):
        raise ValueError(f"this helper takes a power-of-two head count, got {n_heads}")
    return 2.0 ** (-8.0 * torch.arange(1, n_heads + 1, dtype=torch.float64) / n_heads)


def alibi_bias(n_heads: int, s_q: int, s_k: int) -> torch.Tensor:
    """(heads, s_q, s_k) additive logit bias -slope * (i - j): farther keys cost more."""
    i = torch.arange(s_q)[:, None] + (s_k - s_q)
    j = torch.arange(s_k)[None, :]
    distance = (i - j).clamp(min=0).to(torch.float64)  # future keys are masked anyway
    return -alibi_slopes(n_heads)[:, None, None] * distance
# [/attention:masks]


# [attention:varlen]
def cu_seqlens(lengths: list[int]) -> torch.Tensor:
    """Offsets of packed sequences in one token dimension, FlashAttention's ``cu_seqlens``:
    sequence i occupies tokens cu[i] .. cu[i+1] - 1 (int32, one more entry than sequences)."""
    if not lengths or min(lengths) <= 0:
        raise ValueError(f"lengths must be positive, got {lengths}")
    return torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()], dtype=torch.int32)


def packed_causal_mask(lengths: list[int]) -> torch.Tensor:
    """(T, T) visibility for sequences packed end to end (T = sum of lengths): causal inside each
    sequence, nothing across them. A varlen kernel never computes the blocks outside the
    diagonal; a padded batch would compute max(lengths)^2 per sequence instead."""
    cu = cu_seqlens(lengths)
    seq = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(lengths))  # owner of each token
    pos = torch.arange(int(cu[-1]))
    return (seq[:, None] == seq[None, :]) & visible(pos, pos)
# [/attention:varlen]


def mask_text(mask: torch.Tensor) -> str:
    """A boolean (s_q, s_k) mask drawn as text, one line per query row: ``#`` where the key is
    visible, ``.`` where it is masked."""
    return "\n".join(" ".join("#" if v else "." for v in row) for row in mask.tolist())


def receptive_field(window: int, n_layers: int) -> int:
    """Tokens back that information can come from after n_layers of sliding-window attention.

    Each layer lets a position read the previous ``window - 1`` positions, so ``n_layers``
    stacked layers reach ``n_layers * (window - 1)`` tokens back, plus the token itself.
    """
    return n_layers * (window - 1) + 1
