"""Build and load ``scaled_add.cpp``: an operator whose schema and CPU kernel come from C++.

``torch.utils.cpp_extension.load`` compiles the file with the flags of the installed torch and
loads the shared library into this process. Loading runs the ``TORCH_LIBRARY`` and
``TORCH_LIBRARY_IMPL`` blocks as static initializers: they add ``infralens::scaled_add`` to the
dispatcher, with a kernel for the ``CPU`` key only. Nothing is exposed as a Python module; the
operator is reached through ``torch.ops.infralens.scaled_add`` like any ATen operator.

The file includes only the headers it uses (not ``torch/extension.h``), which keeps a cold
compile to seconds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

__all__ = ["SOURCE", "load_scaled_add"]

SOURCE = Path(__file__).with_name("scaled_add.cpp")


def _registered() -> bool:
    return torch._C._dispatch_has_kernel("infralens::scaled_add")


def load_scaled_add(build_dir: str | Path | None = None):
    """Compile (once per process) and return the ``torch.ops.infralens.scaled_add`` packet.

    ``build_dir`` defaults to a fresh temporary folder, so a stale build never stands in for
    the source on disk.
    """
    if not _registered():
        from torch.utils.cpp_extension import load

        folder = Path(build_dir) if build_dir is not None else Path(tempfile.mkdtemp(prefix="scaled_add_"))
        folder.mkdir(parents=True, exist_ok=True)
        load("infralens_scaled_add", sources=[str(SOURCE)], extra_cflags=["-O2"],
             build_directory=str(folder), is_python_module=False, verbose=False)
    return torch.ops.infralens.scaled_add


# [python-kernels-start]
def scaled_add_fake(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Shape, strides, dtype and device of the result, with no data: what fake tensors need.

    The C++ kernel returns a contiguous tensor, so the fake one does too (``empty_like`` would
    copy a transposed input's strides)."""
    torch._check(a.shape == b.shape, lambda: "scaled_add: a and b must have the same shape")
    torch._check(a.dtype == torch.float32 and b.dtype == torch.float32, lambda: "scaled_add: float32 only")
    return a.new_empty(a.shape)


def scaled_add_setup_context(ctx, inputs, output) -> None:
    ctx.alpha = inputs[2]  # nothing else is needed: the gradient does not depend on a or b


def scaled_add_backward(ctx, grad: torch.Tensor):
    return grad, grad * ctx.alpha, None  # d/da, d/db, d/dalpha (a float: no gradient)
# [python-kernels-end]
