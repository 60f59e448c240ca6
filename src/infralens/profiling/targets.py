"""The two kernels Lab 09 profiles with Nsight Compute, launched by a command line ncu can wrap.

    ncu --section SpeedOfLight python -m infralens.profiling.targets add
    ncu --section SpeedOfLight python -m infralens.profiling.targets matmul

``add``: ``a + b`` on two bf16 vectors of :data:`ADD_ELEMENTS` (one FLOP and six bytes per
element: memory-bound). ``matmul``: a bf16 ``(n x n) @ (n x n)`` with :data:`MATMUL_N` (cuBLAS;
``2n³`` FLOPs over about ``6n²`` bytes: compute-bound). Each runs :data:`LAUNCHES` times, so ncu can
skip the first (cold) launch. Bad input: one line, exit 2.
"""

from __future__ import annotations

import sys

from infralens.tools.cli import OneLineParser, UsageError, run_main

PROG = "infralens.profiling.targets"
ADD_ELEMENTS = 2**28
MATMUL_N = 8192
LAUNCHES = 3
TARGETS = ("add", "matmul")


def flops_and_min_bytes(target: str) -> tuple[int, int]:
    """The target's FLOPs and the bytes it must move at least (each operand read once, the
    result written once), both bf16."""
    if target == "add":
        return ADD_ELEMENTS, 3 * 2 * ADD_ELEMENTS
    if target == "matmul":
        return 2 * MATMUL_N**3, 3 * 2 * MATMUL_N**2
    raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")


def _prepare(argv, parser) -> str:
    import torch

    target = parser.parse_args(argv).target
    if not torch.cuda.is_available():
        raise UsageError("the profiling targets need a CUDA GPU")
    return target


def launch(target: str) -> None:
    import torch

    torch.manual_seed(0)
    if target == "add":
        a, b = (torch.randn(ADD_ELEMENTS, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for _ in range(LAUNCHES):
            a + b
    else:
        a, b = (torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        for _ in range(LAUNCHES):
            a @ b
    torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=TARGETS)
    return run_main(PROG, argv, lambda a: _prepare(a, parser), launch)


if __name__ == "__main__":
    sys.exit(main())
