"""Small functions to compile: one that fuses, one that breaks the graph, one that specializes."""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["bias_gelu_residual", "normalize_if_large", "rms_norm", "scale"]


# [examples-start]
def bias_gelu_residual(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
    """Three elementwise ops in eager mode (three kernels, two intermediates in memory)."""
    return residual + F.gelu(x + bias, approximate="tanh")


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """A row reduction and the elementwise ops around it: one fused kernel under Inductor."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def normalize_if_large(x: torch.Tensor) -> torch.Tensor:
    """Python control flow on a tensor's value: Dynamo cannot trace past the ``if``."""
    m = x.abs().max()
    if m > 1:  # needs the value of m on the host: a graph break
        x = x / m
    return torch.tanh(x)


def scale(x: torch.Tensor, k: float) -> torch.Tensor:
    """A Python float argument: Dynamo specializes on its value and guards on it."""
    return torch.relu(x) * k
# [examples-end]
