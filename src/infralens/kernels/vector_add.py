"""The first Triton kernel: ``out = x + y`` over a 1-D tensor, one block of elements per program.

:func:`add_kernel` is the whole programming model in six lines: a program finds its block from
``tl.program_id``, builds the block's offsets with ``tl.arange``, masks the lanes past the end,
loads, computes and stores. :func:`add` launches it on a 1-D grid of ``cdiv(n, BLOCK)`` programs.

``python -m infralens.kernels.vector_add --block 1024`` compiles the kernel for sm_90 without a
GPU and prints, as JSON lines, the text of every compiler stage (TTIR, TTGIR, LLIR, PTX, SASS)
with the registers and shared memory, twice: with ``n`` declared a multiple of 16 (as Triton's
launcher specializes it when it is) and without, to show what that specialization buys.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

__all__ = ["add_kernel", "add", "add_stages", "main"]


# [vector-add:kernel]
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)  # which block of the 1-D grid this program is
    offsets = pid * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) the elements of that block
    mask = offsets < n  # the last block may run past the end
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)
# [/vector-add:kernel]


# [vector-add:launch]
def add(x: torch.Tensor, y: torch.Tensor, *, block: int = 1024) -> torch.Tensor:
    """``x + y`` for two contiguous tensors of one shape, dtype and device."""
    from infralens.tools.triton_compile import check_block

    check_block("BLOCK", block)
    if x.shape != y.shape or x.dtype != y.dtype or x.device != y.device:
        raise ValueError(f"x and y differ: {tuple(x.shape)} {x.dtype} {x.device} and "
                         f"{tuple(y.shape)} {y.dtype} {y.device}")
    if not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError("x and y must be contiguous: the kernel reads them as flat arrays")
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, block),)  # one program per block of elements
    add_kernel[grid](x, y, out, n, BLOCK=block)
    return out
# [/vector-add:launch]


def add_stages(block: int, *, dtype: str = "fp32", aligned_n: bool = True, arch: int = 90,
               num_warps: int = 4) -> dict:
    """Every compiler stage of :func:`add_kernel` for ``sm_<arch>``, compiled without a GPU."""
    from infralens.tools.triton_compile import check_block, compile_stages

    check_block("BLOCK", block)
    signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "out_ptr": f"*{dtype}", "n": "i32",
                 "BLOCK": "constexpr"}
    aligned = ["x_ptr", "y_ptr", "out_ptr"] + (["n"] if aligned_n else [])
    out = compile_stages(add_kernel, signature, {"BLOCK": block}, num_warps=num_warps, arch=arch,
                         aligned=aligned)
    return {"block": block, "dtype": dtype, "aligned_n": aligned_n, "arch": arch,
            "num_warps": num_warps, "triton": triton.__version__, **out}


def main(argv: Sequence[str] | None = None) -> int:
    from infralens.tools.cli import OneLineParser, positive_int
    from infralens.tools.triton_compile import check_block, compile_command

    parser = OneLineParser(
        prog="python -m infralens.kernels.vector_add",
        description="Compile the vector-add kernel for an NVIDIA GPU offline; print every compiler "
                    "stage as JSON.")
    parser.add_argument("--block", type=positive_int, action="append", default=[], metavar="BLOCK")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "fp16", "bf16"))
    parser.add_argument("--arch", type=int, default=90, choices=(80, 90), help="sm_80 or sm_90")
    return compile_command(
        parser, argv, each="block", wanted="--block BLOCK (a power of two)",
        check=lambda args, block: check_block("BLOCK", block),
        compile_all=lambda args: [add_stages(b, dtype=args.dtype, aligned_n=aligned, arch=args.arch)
                                  for b in args.block for aligned in (True, False)])


if __name__ == "__main__":
    raise SystemExit(main())
