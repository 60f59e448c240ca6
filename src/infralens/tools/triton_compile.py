"""Triton without a GPU: compile a ``@triton.jit`` kernel for an NVIDIA target and read its resources.

:func:`compile_stages` and :func:`compile_offline` run Triton's real compiler (PTX, then its own
``ptxas``) for a chosen architecture on a machine with no GPU, so a CPU build can show what a
kernel will cost on an H100: registers per thread, shared memory per program, and the code of
every stage.
:func:`launched_resources` reads the same numbers from a kernel a GPU launch compiled.
:func:`check_block` and :func:`check_options` refuse, in one line and before compiling, what the
compiler or the GPU would refuse; :func:`quiet` keeps Triton's own warnings out of a command's output.
:func:`compile_command` is the ``main`` of every command line that compiles kernels offline and
prints what it found.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import triton
import triton.language as tl

__all__ = ["compile_stages", "compile_offline", "launch_specialization", "offline_json", "launched_resources",
           "check_block", "check_options", "quiet", "compile_command", "interpreting"]

#: The most elements one Triton block may hold.
MAX_BLOCK_NUMEL: int = tl.TRITON_MAX_TENSOR_NUMEL


def offline_json(module: str, *args: str) -> list[dict]:
    """Run ``python -m <module> <args>``, one of the book's offline-compile commands, with the real
    compiler (``TRITON_INTERPRET`` removed from its environment, so it works from a process that
    interprets) and return its JSON lines."""
    import json
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-W", "ignore", "-m", module, *args], env=env, check=True,
                         capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def interpreting() -> bool:
    """Whether Triton runs kernels in its CPU interpreter (``TRITON_INTERPRET`` set and not 0)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def launch_specialization(value) -> tuple[str, object]:
    """How Triton's launcher classifies one argument before it looks up a compiled kernel: the
    type the kernel is compiled for, and the specialization key (``"D"``: an integer divisible
    by 16 or a 16-byte aligned pointer; for the integer 1, the value itself as a constant)."""
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    kind, key = native_specialize_impl(BaseBackend, value, False, True, True)[:2]
    return kind, key


def check_block(name: str, value: int, *, least: int = 1) -> None:
    """Raise ``ValueError`` unless ``value`` is a block size ``tl.arange`` takes: a power of two
    from ``least`` (``tl.dot`` needs 16) to :data:`MAX_BLOCK_NUMEL`."""
    if (not isinstance(value, int) or isinstance(value, bool) or value < least
            or value > MAX_BLOCK_NUMEL or value & (value - 1)):
        raise ValueError(f"{name} {value}: must be a power of two from {least} to {MAX_BLOCK_NUMEL:,}")


def check_options(num_warps: int, num_stages: int = 1) -> None:
    """Raise ``ValueError`` for launch options that Triton or the GPU refuses: ``num_warps`` a power
    of two of at most the warps one block may have, ``num_stages`` at least 1."""
    from infralens.hardware import fact

    most = fact("max_warps_per_block")
    if (not isinstance(num_warps, int) or isinstance(num_warps, bool) or not 1 <= num_warps <= most
            or num_warps & (num_warps - 1)):
        raise ValueError(f"num_warps {num_warps}: must be a power of two from 1 to {most} "
                         "(the most warps one block may have)")
    if not isinstance(num_stages, int) or isinstance(num_stages, bool) or num_stages < 1:
        raise ValueError(f"num_stages {num_stages}: must be at least 1")


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Triton's own ``UserWarning``s (deprecation notices of its defaults) left out, for a command
    whose output is its results."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module=r"triton(\.|$)")
        yield


# [triton-compile:offline]
def compile_stages(kernel, signature: dict[str, str], constexprs: dict, *, num_warps: int,
                   num_stages: int = 1, arch: int = 90, aligned: Iterable[str] | None = None) -> dict:
    """Compile a ``@triton.jit`` kernel for an NVIDIA GPU without one and return the text of every
    stage: Triton IR (``ttir``), Triton GPU IR (``ttgir``), LLVM IR (``llir``), ``ptx`` and the
    machine code ``sass`` (disassembled from the cubin by the ``cuobjdump`` shipped with Triton),
    with ``registers`` per thread and ``shared_bytes`` per program.

    Triton compiles to PTX and runs its own ``ptxas``. The arguments named in ``aligned`` (by
    default every pointer and integer) are declared multiples of 16, as Triton's launcher finds
    them for the shapes of the book. Needs the real compiler, so it refuses to run under
    ``TRITON_INTERPRET=1``.
    """
    if interpreting():
        raise RuntimeError("compiling needs the real compiler: unset TRITON_INTERPRET")
    check_options(num_warps, num_stages)
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    if aligned is None:
        aligned = [name for name, ty in signature.items() if ty.startswith("*") or ty in ("i32", "i64")]
    aligned = set(aligned)
    attrs = {(i,): [["tt.divisibility", 16]] for i, name in enumerate(signature) if name in aligned}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage, sass = (subprocess.run([tool, flag, cubin.name], capture_output=True, text=True,
                                      check=True).stdout for flag in ("-res-usage", "-sass"))
    stages = {name: compiled.asm[name] for name in ("ttir", "ttgir", "llir", "ptx")}
    return {**stages, "sass": sass,
            "registers": int(re.search(r"REG:(\d+)", usage).group(1)),  # per thread
            "stack_bytes": int(re.search(r"STACK:(\d+)", usage).group(1)),  # per thread: spills live here
            "shared_bytes": compiled.metadata.shared}  # per program, as Triton requests it


def compile_offline(kernel, signature: dict[str, str], constexprs: dict, *, num_warps: int,
                    num_stages: int = 1, arch: int = 90) -> dict:
    """Registers per thread, shared memory per program and the PTX of a kernel compiled for an
    NVIDIA GPU without one (:func:`compile_stages`, the other stages left out)."""
    out = compile_stages(kernel, signature, constexprs, num_warps=num_warps, num_stages=num_stages,
                         arch=arch)
    return {key: out[key] for key in ("registers", "shared_bytes", "ptx")}
# [/triton-compile:offline]


def launched_resources(compiled) -> dict:
    """Registers and spills per thread and shared memory per program of a launched kernel
    (the object a ``kernel[grid](...)`` call returns), as the installed Triton compiled it."""
    return {"registers": compiled.n_regs, "spills": compiled.n_spills,
            "shared_bytes": compiled.metadata.shared}


def compile_command(parser, argv: Sequence[str] | None, *, each: str, wanted: str,
                    check: Callable[[Any, Any], None], compile_all: Callable[[Any], list[dict]]) -> int:
    """The ``main`` of a command line that compiles kernels offline, one result per value of a
    repeatable option, printed as JSON lines (through :func:`infralens.tools.cli.run_main`).

    ``parser`` (a :class:`~infralens.tools.cli.OneLineParser`) has the option whose values land in
    ``args.<each>``; ``wanted`` names it in the error when none is given (``"--block BLOCK_N"``).
    ``check(args, value)`` refuses a bad value before the first compile, so one typo costs no
    compile; then ``compile_all(args)`` runs with Triton's warnings left out (:func:`quiet`). A bad
    value, or a compile that fails on the reader's input (``ValueError``, ``RuntimeError``), is one
    line on stderr and exit status 2.
    """
    import json

    from infralens.tools.cli import UsageError, run_main

    def results(argv: Sequence[str] | None) -> list[dict]:
        args = parser.parse_args(argv)
        if not getattr(args, each):
            raise UsageError(f"give {wanted} at least once")
        for value in getattr(args, each):  # every value, before the first compile
            check(args, value)
        with quiet():
            return compile_all(args)

    return run_main(parser.prog, argv, results, lambda rows: print(*map(json.dumps, rows), sep="\n"),
                    errors=(UsageError, ValueError, RuntimeError))
