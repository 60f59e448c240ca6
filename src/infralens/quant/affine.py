"""Affine (uniform) quantization of a weight matrix: round to nearest on a grid of ``2^bits``
levels, with one scale (and zero point) per tensor, per output channel or per group of inputs.

A weight matrix is stored as PyTorch's ``nn.Linear`` stores it, ``(out_features, in_features)``
= ``(N, K)``: a *channel* is a row (one output), a *group* is ``group_size`` consecutive inputs of
one row. For a group with values in ``[lo, hi]``:

* symmetric: ``scale = clip * max|w| / (2^(b-1) - 1)``, ``q = clamp(round(w / scale), -2^(b-1),
  2^(b-1) - 1)``, ``w ~ q * scale``;
* asymmetric: ``scale = clip * (hi - lo) / (2^b - 1)``, ``zero = round(-lo / scale)``,
  ``q = clamp(round(w / scale) + zero, 0, 2^b - 1)``, ``w ~ (q - zero) * scale``.

``clip < 1`` trades a larger error on the few largest values for a finer grid everywhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Quantized", "quantize", "dequantize", "fake_quantize", "GRANULARITIES"]

GRANULARITIES = ("tensor", "channel", "group")


@dataclass(frozen=True)
class Quantized:
    """Integer codes ``q`` (shape of the groups' view), and per-group ``scale`` and ``zero``."""

    q: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bits: int
    shape: tuple[int, ...]
    granularity: str
    group_size: int | None


def _groups(w: torch.Tensor, granularity: str, group_size: int | None) -> torch.Tensor:
    """``w`` viewed as (number of groups, elements per group)."""
    if w.dim() != 2:
        raise ValueError(f"quantize expects a 2-D (out, in) weight, got shape {tuple(w.shape)}")
    n, k = w.shape
    if granularity == "tensor":
        return w.reshape(1, -1)
    if granularity == "channel":
        return w.reshape(n, k)
    if granularity == "group":
        if not group_size or group_size < 1 or k % group_size:
            raise ValueError(f"group_size must divide in_features={k}, got {group_size}")
        return w.reshape(n * (k // group_size), group_size)
    raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")


# [quant:affine]
def quantize(w: torch.Tensor, bits: int, granularity: str = "channel", group_size: int | None = None,
             symmetric: bool = True, clip: float = 1.0) -> Quantized:
    """Round-to-nearest quantization of ``w`` (N, K) to ``bits`` bits, one scale per group."""
    if not 2 <= bits <= 16 or not 0 < clip <= 1:
        raise ValueError(f"need 2 <= bits <= 16 and 0 < clip <= 1, got bits={bits}, clip={clip}")
    g = _groups(w.detach().double(), granularity, group_size)
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        scale = clip * g.abs().amax(dim=1, keepdim=True) / qmax
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zero = torch.zeros_like(scale)
        q = torch.clamp(torch.round(g / scale), -qmax - 1, qmax)
    else:
        lo, hi = g.amin(dim=1, keepdim=True), g.amax(dim=1, keepdim=True)
        mid = (lo + hi) / 2
        lo, hi = mid + clip * (lo - mid), mid + clip * (hi - mid)
        scale = (hi - lo) / (2**bits - 1)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        zero = torch.round(-lo / scale)
        q = torch.clamp(torch.round(g / scale) + zero, 0, 2**bits - 1)
    return Quantized(q, scale, zero, bits, tuple(w.shape), granularity, group_size)


def dequantize(qt: Quantized) -> torch.Tensor:
    """The float64 weight the codes stand for: (q - zero) * scale, in the original shape."""
    return ((qt.q - qt.zero) * qt.scale).reshape(qt.shape)
# [/quant:affine]


def fake_quantize(w: torch.Tensor, bits: int, granularity: str = "channel",
                  group_size: int | None = None, symmetric: bool = True, clip: float = 1.0
                  ) -> torch.Tensor:
    """Quantize and dequantize, in ``w``'s dtype: the weight a quantized model computes with."""
    return dequantize(quantize(w, bits, granularity, group_size, symmetric, clip)).to(w.dtype)
