"""A persistent kernel's grid, sized from the kernel the compiler actually made.

A persistent kernel launches as many programs as the GPU holds at once, one wave, and lets each
loop over the work. How many programs an SM holds is an occupancy question, and its answer depends
on what the compiler allocated: registers per thread and shared memory per program. Triton's
fused-softmax tutorial sizes its grid that way, from ``kernel.n_regs`` and
``kernel.metadata.shared`` of the compiled kernel; :func:`programs_per_sm` does the same through
the occupancy calculator of :mod:`infralens.gpuarch.occupancy`, which also counts the hardware's
allocation units (registers per warp in units of 256, shared memory with its per-block reserve).
A grid sized from the launch options alone (warps per program, pipeline buffers) overestimates
whenever registers bind: the surplus programs wait for a free slot, then run as a second, partial
wave.

``python -m infralens.kernels.persistent_grid --dtype fp32 --block 32768`` compiles Lab 06's
``softmax_persistent_kernel`` for sm_90 without a GPU (:mod:`infralens.tools.triton_compile`) and
prints, per element type and block size, its registers, shared memory and the programs per SM they
allow, as JSON lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from infralens.gpuarch.occupancy import RULES, SUPPORTED, Kernel, occupancy
from infralens.hardware import CC_LIMITS

__all__ = ["programs_per_sm", "compiled_programs_per_sm", "supported_cc", "persistent_kernel_resources"]


# [persistent-grid:programs-per-sm]
def programs_per_sm(registers: int, shared_bytes: int, num_warps: int,
                    cc: tuple[int, int] = (9, 0)) -> int:
    """Programs of a compiled kernel one SM holds at once: its registers per thread and shared
    memory per program through :func:`infralens.gpuarch.occupancy.occupancy`.

    Triton launches a program's shared memory as dynamic shared memory and opts in to more than
    the default per block when it needs to, so the opt-in is raised to what the kernel uses.
    Raises ``ValueError`` if no program fits (the launch itself would fail).
    """
    rules = RULES[cc]
    opt_in = shared_bytes if shared_bytes > rules.smem_per_block_default.value else None
    kernel = Kernel(num_warps * CC_LIMITS[cc].warp_size.value, registers,
                    dynamic_smem_bytes=shared_bytes, max_dynamic_smem_bytes=opt_in)
    occ = occupancy(kernel, cc)
    if occ.blocks_per_sm == 0:
        raise ValueError(f"no program fits on an SM of compute capability {cc}: {occ.invalid}")
    return occ.blocks_per_sm
# [/persistent-grid:programs-per-sm]


def supported_cc(major: int, minor: int) -> tuple[int, int]:
    """The compute capability whose limits size the grid: the device's own where the occupancy
    calculator covers it, else 9.0 (the H100's)."""
    return (major, minor) if (major, minor) in SUPPORTED else (9, 0)


def compiled_programs_per_sm(compiled, num_warps: int, cc: tuple[int, int] = (9, 0)) -> int:
    """:func:`programs_per_sm` of a kernel Triton compiled for this GPU (what
    ``kernel.warmup(..., grid=(1,))`` or a launch returns), as the fused-softmax tutorial reads it."""
    compiled._init_handles()  # loads the binary: n_regs is known from here on
    return programs_per_sm(compiled.n_regs, compiled.metadata.shared, num_warps, cc)


def persistent_kernel_resources(block_n: int, dtype: str = "bf16", num_stages: int | None = None) -> dict:
    """Registers, shared memory and programs per SM of Lab 06's ``softmax_persistent_kernel``,
    compiled for sm_90 without a GPU, with the warps and pipeline stages ``softmax_persistent``
    picks for rows of ``block_n`` elements (or ``num_stages`` given)."""
    import triton

    from infralens.kernels.triton_softmax import (
        persistent_stages,
        row_num_warps,
        softmax_persistent_kernel,
    )
    from infralens.tools.triton_compile import check_block, compile_offline

    check_block("BLOCK_N", block_n)
    elem = {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    num_warps = row_num_warps(block_n, elem)
    if num_stages is None:
        num_stages = persistent_stages(block_n * elem, CC_LIMITS[(9, 0)])
    signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "x_row_stride": "i32",
                 "y_row_stride": "i32", "n_rows": "i32", "n_cols": "i32",
                 "BLOCK_N": "constexpr", "NUM_STAGES": "constexpr"}
    out = compile_offline(softmax_persistent_kernel, signature,
                          {"BLOCK_N": block_n, "NUM_STAGES": num_stages}, num_warps=num_warps)
    return {"block_n": block_n, "dtype": dtype, "num_warps": num_warps, "num_stages": num_stages,
            "registers": out["registers"], "shared_bytes": out["shared_bytes"],
            "programs_per_sm": programs_per_sm(out["registers"], out["shared_bytes"], num_warps),
            "triton": triton.__version__}


def main(argv: Sequence[str] | None = None) -> int:
    from infralens.tools.cli import OneLineParser, positive_int
    from infralens.tools.triton_compile import check_block, compile_command

    parser = OneLineParser(
        prog="python -m infralens.kernels.persistent_grid",
        description="Compile Lab 06's persistent softmax kernel for sm_90 offline; print its "
                    "registers, shared memory and programs per SM.")
    parser.add_argument("--block", type=positive_int, action="append", default=[], metavar="BLOCK_N")
    parser.add_argument("--dtype", action="append", default=[], choices=("bf16", "fp16", "fp32"),
                        help="element type, repeatable (default bf16); every block for every type")
    parser.add_argument("--stages", type=positive_int, default=None,
                        help="pipeline stages (default: what softmax_persistent picks)")
    return compile_command(
        parser, argv, each="block", wanted="--block BLOCK_N (a power of two)",
        check=lambda args, block: check_block("BLOCK_N", block),
        compile_all=lambda args: [persistent_kernel_resources(b, dtype, args.stages)
                                  for dtype in args.dtype or ["bf16"] for b in args.block])


if __name__ == "__main__":
    raise SystemExit(main())
