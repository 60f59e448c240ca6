"""Rotary position embedding (RoPE) and the three ways to stretch it to a longer context.

RoPE encodes the position ``m`` of a token by rotating its query and key, pair of dimensions by
pair of dimensions, through the angles ``m * theta_i`` with ``theta_i = base ** (-2i / d)``
(Su et al., RoFormer). A rotation is orthogonal, so the dot product of a query rotated to ``m``
with a key rotated to ``n`` is ``q^T R(n - m) k``: it depends on the positions only through
their difference. Nothing here is learned; the angle table is a buffer.

Two memory layouts of the same rotation exist in the wild:

* ``"interleaved"``: dimensions ``(2i, 2i+1)`` form pair ``i`` (the RoFormer paper, Meta's
  reference Llama code, which views the head as ``d/2`` complex numbers);
* ``"half"``: dimensions ``(i, i + d/2)`` form pair ``i`` (Hugging Face's ``rotate_half``).

They differ by a fixed permutation of the head dimensions (:func:`interleaved_to_half`), which is
why checkpoint converters permute the rows of ``W_q`` and ``W_k``.

Context extension (functions at the end) changes the angles so that a model trained on
``L`` tokens sees familiar angles at ``s * L`` tokens: position interpolation divides every
angle by ``s``; "NTK-aware" scaling raises the base instead; YaRN interpolates only the
low-frequency pairs and adds an attention temperature.
"""

from __future__ import annotations

import math
from typing import Literal, TypeAlias

import torch

Layout: TypeAlias = Literal["interleaved", "half"]


# [transformer:rope]
def rope_frequencies(head_dim: int, base: float = 10_000.0) -> torch.Tensor:
    """theta_i = base^(-2i/d) for i = 0 .. d/2 - 1, in float64: pair 0 turns fastest."""
    if head_dim <= 0 or head_dim % 2:
        raise ValueError(f"head_dim must be a positive even number, got {head_dim}")
    i = torch.arange(head_dim // 2, dtype=torch.float64)
    return base ** (-2 * i / head_dim)  # (d/2,)


def apply_rope(x: torch.Tensor, positions: torch.Tensor, freqs: torch.Tensor,
               layout: Layout = "interleaved") -> torch.Tensor:
    """Rotate every pair of ``x`` (..., s, d) by the angle positions[s] * freqs[pair]."""
    angles = positions.to(torch.float64)[:, None] * freqs[None, :]  # (s, d/2): m * theta_i
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]  # pair i = dims (2i, 2i+1)
    elif layout == "half":
        x1, x2 = x.chunk(2, dim=-1)  # pair i = dims (i, i + d/2)
    else:
        raise ValueError(f"layout must be 'interleaved' or 'half', got {layout!r}")
    r1 = x1 * cos - x2 * sin  # a 2-D rotation of (x1, x2) by the angle m * theta_i
    r2 = x1 * sin + x2 * cos
    if layout == "interleaved":
        return torch.stack((r1, r2), dim=-1).flatten(-2)  # back to (2i, 2i+1) order
    return torch.cat((r1, r2), dim=-1)
# [/transformer:rope]


def rotated_score(q: torch.Tensor, k: torch.Tensor, m: int, n: int, freqs: torch.Tensor,
                  layout: Layout = "interleaved") -> float:
    """<R_m q, R_n k> for one query vector at position m and one key vector at position n."""
    qm = apply_rope(q[None, :], torch.tensor([m]), freqs, layout)[0]
    kn = apply_rope(k[None, :], torch.tensor([n]), freqs, layout)[0]
    return float(qm @ kn)


def interleaved_to_half(x: torch.Tensor) -> torch.Tensor:
    """Reorder the last dimension from pairs (2i, 2i+1) to pairs (i, i + d/2)."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


def wavelengths(freqs: torch.Tensor) -> torch.Tensor:
    """Tokens per full turn of each pair: 2 pi / theta_i."""
    return 2 * math.pi / freqs


# --- context extension ----------------------------------------------------------------------

# [transformer:context-extension]
def pi_frequencies(freqs: torch.Tensor, factor: float) -> torch.Tensor:
    """Position interpolation (Chen et al. 2023): position m -> m / s, i.e. every theta / s."""
    return freqs / factor


def ntk_base(base: float, head_dim: int, factor: float) -> float:
    """'NTK-aware' base: the slowest pair is interpolated by exactly s, the fastest barely moves.

    theta_slowest = base^(-(d-2)/d); asking base'^(-(d-2)/d) = base^(-(d-2)/d) / s gives
    base' = base * s^(d/(d-2)).
    """
    return base * factor ** (head_dim / (head_dim - 2))


def yarn_frequencies(freqs: torch.Tensor, factor: float, original_context: int,
                     alpha: float = 1.0, beta: float = 32.0) -> torch.Tensor:
    """YaRN's 'NTK-by-parts' (Peng et al. 2023): interpolate a pair by how often it turns.

    r = L / wavelength counts the turns a pair makes over the trained context L. Pairs that turn
    more than beta times keep theta (they encode local order and never saw out-of-range angles);
    pairs that turn less than alpha times are interpolated like PI (theta / s); a linear ramp
    blends the two in between.
    """
    r = original_context / wavelengths(freqs)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)  # 0: interpolate, 1: keep
    return (1 - gamma) * freqs / factor + gamma * freqs


def yarn_attention_scale(factor: float) -> float:
    """YaRN multiplies q and k by 0.1 ln(s) + 1, so the logits by its square (a temperature)."""
    return 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
# [/transformer:context-extension]
