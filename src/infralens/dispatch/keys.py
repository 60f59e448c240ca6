"""Dispatch keys, dispatch tables and logging modes: what the dispatcher sees and chooses.

Every tensor carries a *dispatch key set* (its backend, such as ``CPU``, plus functionality keys
such as ``AutogradCPU``); the thread carries an *include* set and an *exclude* set (autocast,
``no_grad``-like guards and the autograd kernel itself edit them). For each call the dispatcher
takes the union of the arguments' key sets, adds the thread's include set, removes its exclude
set, and runs the kernel registered for the highest-priority key left. A kernel that handled its
layer (autograd recording the graph, autocast casting the inputs) excludes its own key and calls
the operator again, which lands on the next key down, until a backend kernel computes.

:func:`tensor_keys` and :func:`thread_keys` read the sets; :func:`dispatch_table` reads which
kernel an operator has for a key; :class:`AtenLog` and :class:`TorchLog` record the calls that
reach the bottom and the top of that stack.
"""

from __future__ import annotations

import re

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from infralens.tools.glue import repo_relative

__all__ = ["AtenLog", "TorchLog", "dispatch_table", "tensor_keys", "thread_keys"]


def _keys(keyset) -> list[str]:
    """``DispatchKeySet(CPU, AutogradCPU)`` -> ``['CPU', 'AutogradCPU']``."""
    inner = str(keyset)[len("DispatchKeySet("):-1]
    return [k.strip() for k in inner.split(",") if k.strip()]


def tensor_keys(t: torch.Tensor) -> list[str]:
    """The dispatch keys a tensor carries, lowest priority first (as PyTorch prints them)."""
    return _keys(torch._C._dispatch_keys(t))


def thread_keys() -> dict[str, list[str]]:
    """This thread's local include and exclude sets (autocast and inference mode edit them)."""
    return {"include": _keys(torch._C._dispatch_tls_local_include_set()),
            "exclude": _keys(torch._C._dispatch_tls_local_exclude_set())}


_TABLE_ROW = re.compile(r"^(\w+): (.*)$")


def dispatch_table(op: str, keys: tuple[str, ...] | None = None) -> dict[str, str]:
    """The kernel the dispatcher would run for each key of ``op`` (``'aten::add.Tensor'``).

    Reads ``torch._C._dispatch_dump_table``: one line per key that has a kernel, naming where it
    was registered (a file and line, relative to this checkout when it is inside it) and its kind
    (``[kernel]``, ``[autograd kernel]``, ``[backend fallback]``, a ``fallthrough``). ``keys``
    keeps only those keys, in that order.
    """
    rows: dict[str, str] = {}
    for line in torch._C._dispatch_dump_table(op).splitlines():
        m = _TABLE_ROW.match(line.strip())
        if m:
            rows[m.group(1)] = repo_relative(m.group(2).strip())
    if keys is None:
        return rows
    return {k: rows[k] for k in keys if k in rows}


class AtenLog(TorchDispatchMode):
    """Records each ATen operator that reaches the bottom of the dispatcher (below autograd).

    A ``TorchDispatchMode`` runs at the ``Python`` dispatch key, after autograd and autocast have
    done their work, so it sees the operators that compute: decompositions of composite
    operators (``linear`` arrives as ``t`` and ``addmm``), with their overload names and the
    dtypes autocast chose.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        dtypes = tuple(str(a.dtype).removeprefix("torch.") for a in args if isinstance(a, torch.Tensor))
        self.calls.append((str(func), dtypes))
        return out


class TorchLog(TorchFunctionMode):
    """Records each ``torch`` API call at the top of the stack, before the dispatcher runs."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
        module = getattr(func, "__module__", None) or ""
        self.calls.append(f"{module}.{name}" if module and not name.startswith("Tensor") else name)
        return func(*args, **(kwargs or {}))
