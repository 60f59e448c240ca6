"""Triton without a GPU: compile a ``@triton.jit`` kernel for an NVIDIA target and read its resources.

:func:`compile_offline` runs Triton's real compiler (PTX, then its own ``ptxas``) for a chosen
architecture on a machine with no GPU, so a CPU build can show what a kernel will cost on an
H100: registers per thread, shared memory per program, and the PTX itself.
:func:`launched_resources` reads the same numbers from a kernel a GPU launch compiled.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile

import triton

__all__ = ["compile_offline", "launched_resources"]


# [triton-compile:offline]
def compile_offline(kernel, signature: dict[str, str], constexprs: dict, *, num_warps: int,
                    num_stages: int = 1, arch: int = 90) -> dict:
    """Compile a ``@triton.jit`` kernel for an NVIDIA GPU without one and report its resources.

    Triton compiles to PTX and runs its own ``ptxas``; the ``cuobjdump`` shipped with Triton
    reads the registers per thread from the binary. Pointer and integer arguments are declared
    multiples of 16, as Triton's launcher finds them for the shapes of the labs. Needs the real
    compiler, so it refuses to run under ``TRITON_INTERPRET=1``.
    """
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        raise RuntimeError("compiling needs the real compiler: unset TRITON_INTERPRET")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    attrs = {(i,): [["tt.divisibility", 16]] for i, ty in enumerate(signature.values())
             if ty.startswith("*") or ty in ("i32", "i64")}
    compiled = triton.compile(ASTSource(kernel, signature, constexprs, attrs),
                              target=GPUTarget("cuda", arch, 32),
                              options={"num_warps": num_warps, "num_stages": num_stages})
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        usage = subprocess.run([tool, "-res-usage", cubin.name], capture_output=True, text=True,
                               check=True).stdout
    return {"registers": int(re.search(r"REG:(\d+)", usage).group(1)),  # per thread
            "shared_bytes": compiled.metadata.shared,  # per program, as Triton requests it
            "ptx": compiled.asm["ptx"]}
# [/triton-compile:offline]


def launched_resources(compiled) -> dict:
    """Registers and spills per thread and shared memory per program of a launched kernel
    (the object a ``kernel[grid](...)`` call returns), as the installed Triton compiled it."""
    return {"registers": compiled.n_regs, "spills": compiled.n_spills,
            "shared_bytes": compiled.metadata.shared}
