"""A custom autograd node: SiLU that saves its input and nothing else.

Written as two operators, ``x * torch.sigmoid(x)`` records a ``SigmoidBackward0`` that saves
σ(x) and a ``MulBackward0`` that saves both x and σ(x): two activations of x's size kept until
backward. :class:`SiLU` saves x once and recomputes σ(x) in backward, trading one cheap
elementwise op for one tensor of memory, the same trade as activation checkpointing at the size
of one operator.
"""

from __future__ import annotations

import torch

__all__ = ["SiLU"]


# [function-start]
class SiLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)  # saved by reference; its version counter is checked later
        return x * torch.sigmoid(x)  # inside forward, autograd records nothing

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors  # raises if x was modified in place after forward
        s = torch.sigmoid(x)
        return grad * s * (1 + x * (1 - s))
# [function-end]
