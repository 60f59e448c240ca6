"""The book's CUDA kernels as libraries a page can call.

``reduce.cu`` and ``transpose.cu`` sit next to this file. This module builds one by name
(through :mod:`infralens.tools.nvcc`), loads it with ``ctypes``, launches its ``extern "C"``
launchers on PyTorch tensors on PyTorch's current stream with every return code checked (a
failed launch raises :class:`CudaError` with CUDA's own name for it), and profiles its kernels
with Nsight Compute. :mod:`~infralens.kernels.reduce` and :mod:`~infralens.kernels.transpose`
bind each file's launchers.

No import of torch happens at module import; the functions that need it import it themselves.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from infralens.tools import ncu, nvcc

KERNEL_DIR = Path(__file__).resolve().parent
SOURCES = {"reduce": "reduce.cu", "transpose": "transpose.cu"}


class CudaError(RuntimeError):
    """A CUDA runtime call or kernel launch returned an error code."""

    def __init__(self, call: str, code: int, name: str, message: str):
        super().__init__(f"{call}: {name} ({code}): {message}")
        self.call, self.code, self.name = call, code, name


def source_path(name: str) -> Path:
    if name not in SOURCES:
        raise ValueError(f"unknown kernel source {name!r}: expected one of {', '.join(SOURCES)}")
    return KERNEL_DIR / SOURCES[name]


def build(name: str, archs: Sequence[str] = nvcc.ARCHS, *, force: bool = False) -> nvcc.Build:
    """:func:`infralens.tools.nvcc.build` of the named source (``"reduce"``, ``"transpose"``)."""
    return nvcc.build(source_path(name), archs, force=force)


def ptx(name: str, arch: str = "sm_90") -> str:
    """:func:`infralens.tools.nvcc.ptx` of the named source."""
    return nvcc.ptx(source_path(name), arch)


def kernel_order(name: str) -> list[str]:
    """The ``__global__`` functions of the named source, in the order they are defined."""
    return nvcc.kernel_order(source_path(name))


# --- checks and launches --------------------------------------------------------------------------

def torch_module():
    import torch

    return torch


def check_output(out, x, numel: int, what: str) -> None:
    torch = torch_module()
    if not isinstance(out, torch.Tensor) or out.dtype != torch.float32 or not out.is_contiguous():
        raise TypeError(f"{what} must be a contiguous float32 tensor")
    if out.numel() < numel:
        raise ValueError(f"{what} has {out.numel()} elements, needs at least {numel}")
    if out.device != x.device:
        raise ValueError(f"{what} is on {out.device}, x on {x.device}")


VOID_P, LONGLONG, INT = ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int


# [library:check]
class Library:
    """A built shared library with its error helpers; :meth:`check` turns codes into exceptions."""

    SOURCE = ""  # a subclass's source, a key of SOURCES: built when no build is given

    def __init__(self, build_: nvcc.Build | None = None):
        self.build = build_ or build(self.SOURCE)
        self.lib = ctypes.CDLL(str(self.build.library))
        self.fns: dict[str, Callable[..., int]] = {}
        for helper in ("infralens_error_string", "infralens_error_name"):
            getattr(self.lib, helper).restype = ctypes.c_char_p
            getattr(self.lib, helper).argtypes = [INT]

    def check(self, call: str, code: int) -> None:
        if code != 0:
            name = self.lib.infralens_error_name(code).decode()
            message = self.lib.infralens_error_string(code).decode()
            raise CudaError(call, code, name, message)

    def _fn(self, name: str, argtypes: list, restype=INT) -> Callable[..., int]:
        fn = self.fns[name] = getattr(self.lib, name)
        fn.argtypes, fn.restype = argtypes, restype
        return fn

    def launch(self, name: str, keep: tuple, *args, call: str | None = None) -> Launch:
        """A :class:`Launch` of the C function ``name`` (declared with :meth:`_fn`) on ``args`` and
        PyTorch's current stream on the device of ``keep[0]``: every launcher takes the stream last.
        ``call`` names the launch in errors (default: ``name``)."""
        return Launch(keep, self, call or name, self.fns[name],
                      (*args, current_stream(keep[0].device)))


class Launch:
    """A bound launcher: calls the C function with fixed arguments and checks its return code.

    It holds the tensors whose pointers it passes, so their memory outlives every launch.
    """

    __slots__ = ("keep", "library", "call", "fn", "args")

    def __init__(self, keep, library: Library, call: str, fn, args):
        self.keep, self.library, self.call, self.fn, self.args = keep, library, call, fn, args

    def __call__(self) -> None:
        self.library.check(self.call, self.fn(*self.args))
# [/library:check]


def current_stream(device) -> int:
    """The raw cudaStream_t of PyTorch's current stream on `device`, so events time our kernels."""
    return torch_module().cuda.current_stream(device).cuda_stream


# --- profiling ----------------------------------------------------------------------------------

def ncu_ratio(counters: Mapping[str, float | None], numerator: str, denominator: str) -> float | None:
    """``counters[numerator] / counters[denominator]`` for one kernel's Nsight Compute counters, or
    None when either is missing or the denominator is zero (wavefronts per instruction, sectors
    per request, threads per warp instruction)."""
    a, b = counters.get(numerator), counters.get(denominator)
    return a / b if a is not None and b else None


def shared_bank_conflicts(counters: Mapping[str, float | None]) -> float:
    """Shared-memory bank conflicts of one kernel, loads and stores together (a missing counter
    counts as zero)."""
    return sum(counters.get(f"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{op}.sum") or 0
               for op in ("ld", "st"))


def run_ncu(name: str, metrics: Iterable[str], driver_args: Sequence[str] = (), *,
            timeout: float = 300.0) -> dict:
    """Profile every kernel of ``<name>.cu`` once with Nsight Compute and return the counters.

    Runs ``python -m infralens.kernels ncu-driver NAME ARGS`` under ``ncu`` (the driver launches
    each kernel once on random data): :func:`infralens.tools.ncu.profile` does the rest.
    """
    env = dict(os.environ)  # the driver imports this package: make sure it can
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(KERNEL_DIR.parents[1]),
                                                      env.get("PYTHONPATH")]))
    out = ncu.profile([sys.executable, "-m", "infralens.kernels", "ncu-driver", name, *driver_args],
                      metrics, kernel_regex="^(reduce|copy|transpose)", env=env, timeout=timeout)
    return {**out, "driver": [name, *driver_args]}


def run_ncu_source(name: str, driver_args: Sequence[str] = (), *, kernel_regex: str,
                   metrics: Iterable[str] = ncu.SHARED_METRICS, timeout: float = 300.0) -> dict:
    """Nsight Compute's Source page for the kernels of ``<name>.cu`` that ``kernel_regex`` picks,
    launched once each by the ``ncu-driver`` of :func:`run_ncu`: every shared-memory instruction's
    wavefronts against the wavefronts its addresses require, with the aggregate ``metrics`` of the
    same launches (:func:`infralens.tools.ncu.profile_source`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(KERNEL_DIR.parents[1]),
                                                      env.get("PYTHONPATH")]))
    out = ncu.profile_source([sys.executable, "-m", "infralens.kernels", "ncu-driver", name, *driver_args],
                             metrics, kernel_regex=kernel_regex, env=env, timeout=timeout)
    return {**out, "driver": [name, *driver_args]}
