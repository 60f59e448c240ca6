"""The YAML PyTorch's operators are generated from, read from the installed ``torchgen``.

ATen's operators are declared once, in ``native_functions.yaml``: a schema (the operator's
signature, with aliasing annotations such as ``Tensor(a!)`` for a mutated argument), the kernel
per dispatch key, and flags such as ``structured_delegate`` (a functional and an in-place variant
both implemented by one ``out=`` kernel). Their derivatives are declared in
``derivatives.yaml``: one formula per differentiable input. ``torchgen`` turns the two into the
C++ registrations, the autograd kernels (``VariableType``), the ``torch.*`` Python bindings and
the ``Functions.h`` API. Wheels ship both files inside ``torchgen/packaged``.
"""

from __future__ import annotations

from pathlib import Path

import torchgen

__all__ = ["DERIVATIVES", "NATIVE_FUNCTIONS", "derivatives_entry", "native_functions_entry"]

_PACKAGED = Path(torchgen.__file__).parent / "packaged"
NATIVE_FUNCTIONS = _PACKAGED / "ATen" / "native" / "native_functions.yaml"
DERIVATIVES = _PACKAGED / "autograd" / "derivatives.yaml"


def _entry(path: Path, key: str, name: str) -> str:
    """The YAML block whose first line is ``- <key>: <name>(``, up to the next blank line or entry."""
    lines = path.read_text().splitlines()
    start = f"- {key}: {name}("
    for i, line in enumerate(lines):
        if line.startswith(start):
            block = [line]
            for nxt in lines[i + 1:]:
                if not nxt.strip() or nxt.startswith("- "):
                    break
                block.append(nxt)
            return "\n".join(block)
    raise KeyError(f"{name} not found in {path.name}")


def native_functions_entry(name: str) -> str:
    """The ``native_functions.yaml`` block of an overload, e.g. ``'add.Tensor'``."""
    return _entry(NATIVE_FUNCTIONS, "func", name)


def derivatives_entry(name: str) -> str:
    """The ``derivatives.yaml`` block of an overload, e.g. ``'mul.Tensor'``."""
    return _entry(DERIVATIVES, "name", name)
