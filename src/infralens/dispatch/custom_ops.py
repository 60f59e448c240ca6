"""A kernel PyTorch cannot see into, wrapped as an operator with ``torch.library.custom_op``.

``silu_numpy`` computes SiLU, x·σ(x), in NumPy: to autograd, to ``torch.compile`` and to the
dispatcher it is opaque. Registered as ``infralens::silu_numpy`` it becomes one dispatcher
operator with

* a **fake kernel** (``register_fake``): the output's shape, strides, dtype and device from the
  inputs' metadata, which Dynamo and AOTAutograd use to trace through it without running it;
* a **backward** (``register_autograd``): ``setup_context`` saves what the gradient needs (the
  input only) and ``backward`` computes dL/dx = g·σ(x)·(1 + x·(1 − σ(x))) with torch operators,
  so the backward itself is traceable.

``torch.library.opcheck`` tests the registrations against the real kernel; under
``torch.compile`` the operator stays one node of the graph instead of forcing a graph break.
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["silu_numpy"]


# [custom-op-start]
@torch.library.custom_op("infralens::silu_numpy", mutates_args=())
def silu_numpy(x: torch.Tensor) -> torch.Tensor:
    """SiLU computed by NumPy on the CPU (an opaque kernel, as a vendor library would be)."""
    a = x.detach().cpu().numpy()
    y = a / (1.0 + np.exp(-a))
    return torch.from_numpy(np.ascontiguousarray(y)).to(x.device)


@silu_numpy.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    torch._check(x.dtype in (torch.float16, torch.float32, torch.float64), lambda: "NumPy has no bfloat16")
    return x.new_empty(x.shape)  # contiguous, like the real kernel's output (not empty_like's strides)


def _setup_context(ctx, inputs, output) -> None:
    (x,) = inputs
    ctx.save_for_backward(x)  # the input only: σ(x) is recomputed in backward


def _backward(ctx, grad: torch.Tensor) -> torch.Tensor:
    (x,) = ctx.saved_tensors
    s = torch.sigmoid(x)
    return grad * s * (1 + x * (1 - s))


silu_numpy.register_autograd(_backward, setup_context=_setup_context)
# [custom-op-end]
