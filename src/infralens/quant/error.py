"""How far a quantized layer's output is from the original: the one error measure the book's
quantization pages compare methods with."""

from __future__ import annotations

import torch

__all__ = ["relative_output_error"]


def relative_output_error(y: torch.Tensor, y_ref: torch.Tensor) -> float:
    """``mean((y - y_ref)^2) / mean(y_ref^2)``: the output error's energy relative to the
    output's, so that layers of different scale compare."""
    y, y_ref = y.double(), y_ref.double()
    return float((y - y_ref).pow(2).mean() / y_ref.pow(2).mean())
