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
low-frequency pairs and adds an attention temperature (:func:`yarn_frequencies` ramps in the
number of turns, as the paper writes it; :func:`yarn_frequencies_by_index` in the pair index, as
the reference code and the libraries do).
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
    """YaRN's "NTK-by-parts" as the paper defines it (Peng et al. 2023): interpolate a
    pair by how often it turns, with a ramp that is linear in the number of turns r.

    r = L / wavelength counts the turns a pair makes over the trained context L. Pairs that turn
    more than beta times keep theta (they encode local order and never saw out-of-range angles);
    pairs that turn less than alpha times are interpolated like PI (theta / s); a ramp linear in
    r blends the two in between. (The reference code, Hugging Face and vLLM ramp linearly in
    the pair index instead: :func:`yarn_frequencies_by_index`.)
    """
    r = original_context / wavelengths(freqs)
    gamma = ((r - alpha) / (beta - alpha)).clamp(0.0, 1.0)  # 0: interpolate, 1: keep
    return (1 - gamma) * freqs / factor + gamma * freqs


def yarn_frequencies_by_index(freqs: torch.Tensor, factor: float, original_context: int,
                              alpha: float = 1.0, beta: float = 32.0,
                              truncate: bool = True) -> torch.Tensor:
    """YaRN as its reference code, Hugging Face (``_compute_yarn_parameters``) and vLLM compute
    it: the thresholds of beta and alpha turns become (fractional) pair indices, rounded outwards
    to whole pairs when ``truncate``, and the ramp between them is linear in the pair index.

    Pair i turns r_i = L theta_i / 2 pi times, and log theta_i falls by the same step per pair,
    so the pair that turns exactly r times is i(r) = ln(L / 2 pi r) / step. Because r_i is
    exponential in i, a ramp linear in i is not the ramp linear in r of
    :func:`yarn_frequencies`; the two agree outside the ramp.
    """
    if freqs.numel() < 2:
        raise ValueError("need at least two pairs to find the step between them")
    step = math.log(float(freqs[0] / freqs[1]))  # ln(theta_i / theta_{i+1}) = 2 ln(base) / d

    def pair_index(turns: float) -> float:
        return math.log(original_context / (2 * math.pi * turns)) / step

    low, high = pair_index(beta), pair_index(alpha)  # beta turns: a faster pair, lower index
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, 2 * freqs.numel() - 1)  # as the reference code clamps
    if high == low:
        high += 0.001  # the reference code's guard against a zero-width ramp
    i = torch.arange(freqs.numel(), dtype=torch.float64)
    ramp = ((i - low) / (high - low)).clamp(0.0, 1.0)  # 0: keep theta, 1: theta / s
    return ramp * freqs / factor + (1 - ramp) * freqs


def yarn_attention_scale(factor: float) -> float:
    """YaRN multiplies q and k by 0.1 ln(s) + 1, so the logits by its square (a temperature)."""
    return 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
# [/transformer:context-extension]


def rope_decay_bound(distances: torch.Tensor, freqs: torch.Tensor) -> torch.Tensor:
    """RoFormer's long-term decay (Su et al., section 3.4.3): the relative upper bound
    (2/d) sum_{j=1}^{d/2} |S_j|, S_j = sum_{k<j} exp(i r theta_k), of the position-dependent part
    of a rotary score at relative distance r, one value per distance.

    At r = 0 every term is 1 and the bound is (d/2 + 1) / 2; it falls as r grows, faster for a
    small base (larger angles). Abel summation gives the bound: a score is
    Re sum_k h_k exp(i r theta_k) <= max_k |h_{k+1} - h_k| * sum_j |S_j|.
    """
    r = torch.as_tensor(distances, dtype=torch.float64)[..., None]  # (..., 1)
    partial = torch.cumsum(torch.exp(1j * r * freqs.to(torch.float64)), dim=-1)  # S_1 .. S_{d/2}
    return partial.abs().mean(dim=-1)
