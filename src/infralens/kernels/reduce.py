"""The reduction ladder of ``reduce.cu``, callable from Python: one rung per kernel.

``ReduceKernels().sum(x, rung)`` launches one rung on a float32 CUDA tensor; ``bind`` returns a
no-argument launcher for timing loops. Inputs are validated in Python first
(:func:`check_reduce_input`), so a bad tensor fails with one line before any launch.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

from infralens.kernels.library import INT, LONGLONG, VOID_P, Library, check_output, torch_module
from infralens.tools import ncu, nvcc

REDUCE_RUNGS = (
    "reduce0_atomic",
    "reduce1_interleaved_divergent",
    "reduce2_interleaved_strided",
    "reduce3_sequential",
    "reduce4_first_add",
    "reduce5_warp_shuffle",
    "reduce6_grid_stride",
)
TREE_RUNGS = REDUCE_RUNGS[1:6]  # the rungs with a shared-memory tree and one atomic per block
#: Rung 6 in one kernel: its grid and loop, then one atomic per block (nondeterministic), or the
#: last block to finish adding the partials in rung 6's order (deterministic). Not rungs of the
#: ladder: the launcher takes them by their position here.
SINGLE_KERNEL_VARIANTS = ("reduce_grid_atomic", "reduce_grid_last_block")
INPUT_KINDS = ("integers", "normal")


def check_reduce_input(x, *, vector: bool = False) -> None:
    """Raise TypeError/ValueError unless ``x`` is a non-empty, contiguous float32 CUDA tensor.

    ``vector`` (rung 6 and the copy) also needs a 16-byte-aligned start for float4 loads. The
    device comes last, so every other rule can be checked on CPU tensors.
    """
    torch = torch_module()
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
    if x.dtype != torch.float32:
        raise TypeError(f"x must be float32, not {str(x.dtype).removeprefix('torch.')}")
    if x.numel() == 0:
        raise ValueError("x is empty: there is nothing to reduce")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (call .contiguous() first)")
    if vector and x.data_ptr() % 16:
        raise ValueError("x must start on a 16-byte boundary for float4 loads "
                         "(a fresh tensor does; a slice may not: pass x.clone())")
    if not x.is_cuda:
        raise ValueError(f"x must be on a CUDA device, not {x.device}")


def random_input(n: int, kind: str, generator, device: str = "cuda"):
    """``n`` random float32 values for the correctness checks, never zeros.

    ``"integers"``: nonzero integers from -8 to 8 with random signs; float32 holds every integer up
    to 2**24 exactly, so a sum whose partial sums stay within that range is exact in any order.
    ``"normal"``: standard normal floats. ``generator`` is a ``torch.Generator`` on ``device``.
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"unknown input kind {kind!r}: expected one of {', '.join(INPUT_KINDS)}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    torch = torch_module()
    if kind == "integers":
        magnitude = torch.randint(1, 9, (n,), generator=generator, device=device)
        sign = torch.randint(0, 2, (n,), generator=generator, device=device) * 2 - 1
        return (magnitude * sign).float()
    return torch.randn(n, generator=generator, device=device)


def sass_tree_counts(ops: list[str]) -> dict[str, int]:
    """What a tree rung's machine code does between its first and its last barrier.

    ``ops`` is one kernel's op list from :func:`infralens.tools.nvcc.sass_ops`. Returns the tree's
    levels (barriers in that span, less one), its shared loads (LDS) and stores (STS), and its
    branches (BRA): zero branches means ptxas predicated the levels instead of branching.
    """
    bars = [i for i, op in enumerate(ops) if op.startswith("BAR")]
    if len(bars) < 2:
        raise ValueError(f"{len(bars)} barrier(s) in these ops: a tree has at least two")
    tree = ops[bars[0]:bars[-1] + 1]
    return {"levels": len(bars) - 1, "lds": sum(op.startswith("LDS") for op in tree),
            "sts": sum(op.startswith("STS") for op in tree), "bra": sum(op == "BRA" for op in tree)}


class ReduceKernels(Library):
    """The reduction ladder of ``reduce.cu``: ``kernels.sum(x, rung)`` for every rung in ``RUNGS``."""

    RUNGS = REDUCE_RUNGS
    SOURCE = "reduce"

    def __init__(self, build_: nvcc.Build | None = None):
        super().__init__(build_)
        for rung in REDUCE_RUNGS[:-1]:
            self._fn(f"launch_{rung}", [VOID_P, VOID_P, LONGLONG, VOID_P])
        self._fn("launch_reduce6_grid_stride", [VOID_P, VOID_P, VOID_P, INT, LONGLONG, VOID_P])
        self._fn("launch_copy_vec4", [VOID_P, VOID_P, LONGLONG, VOID_P])
        self._grid = self._fn("reduce6_grid_size", [ctypes.POINTER(INT)])
        self._fn("launch_reduce_block_sums", [INT, VOID_P, VOID_P, LONGLONG, LONGLONG, VOID_P])
        self._tree_blocks = self._fn("reduce_tree_blocks", [INT, LONGLONG], restype=LONGLONG)
        self._variant_grid = self._fn("reduce_variant_grid_size", [INT, ctypes.POINTER(INT)])
        self._fn("launch_reduce_variant", [INT, VOID_P, VOID_P, VOID_P, INT, VOID_P, LONGLONG, VOID_P])

    def grid_size(self, kernel: str = "reduce6_grid_stride") -> int:
        """Blocks in the fixed grid of rung 6 (or of a :data:`SINGLE_KERNEL_VARIANTS` kernel) on the
        current device: SMs x resident blocks per SM."""
        blocks = INT(0)
        if kernel == "reduce6_grid_stride":
            self.check("reduce6_grid_size", self._grid(ctypes.byref(blocks)))
        elif kernel in SINGLE_KERNEL_VARIANTS:
            self.check("reduce_variant_grid_size",
                       self._variant_grid(SINGLE_KERNEL_VARIANTS.index(kernel), ctypes.byref(blocks)))
        else:
            raise ValueError(f"{kernel!r} has no fixed grid: expected reduce6_grid_stride or one of "
                             f"{', '.join(SINGLE_KERNEL_VARIANTS)}")
        return blocks.value

    def bind(self, rung: str, x, out=None, partials=None) -> Callable[[], None]:
        """A no-argument launcher of one rung (or single-kernel variant) on fixed tensors:
        validated once, for timing loops."""
        if rung in SINGLE_KERNEL_VARIANTS:
            return self._bind_variant(rung, x, out, partials)
        if rung not in REDUCE_RUNGS:
            raise ValueError(f"unknown rung {rung!r}: expected one of "
                             f"{', '.join(REDUCE_RUNGS + SINGLE_KERNEL_VARIANTS)}")
        torch = torch_module()
        check_reduce_input(x, vector=rung == "reduce6_grid_stride")
        out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
        check_output(out, x, 1, "out")
        if rung != "reduce6_grid_stride":
            return self.launch(f"launch_{rung}", (x, out), x.data_ptr(), out.data_ptr(), x.numel())
        blocks = self.grid_size()
        if partials is None:
            partials = torch.empty(blocks, dtype=torch.float32, device=x.device)
        check_output(partials, x, blocks, "partials")
        return self.launch(f"launch_{rung}", (x, out, partials), x.data_ptr(), out.data_ptr(),
                           partials.data_ptr(), partials.numel(), x.numel())

    def _bind_variant(self, kernel: str, x, out, partials) -> Callable[[], None]:
        """A single-kernel variant of rung 6. The last-block variant keeps one partial per block
        and a ticket counter, both allocated here unless ``partials`` is given."""
        torch = torch_module()
        check_reduce_input(x, vector=True)
        out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
        check_output(out, x, 1, "out")
        variant = SINGLE_KERNEL_VARIANTS.index(kernel)
        blocks = self.grid_size(kernel)
        if variant == 0:
            return self.launch("launch_reduce_variant", (x, out), variant, x.data_ptr(),
                               out.data_ptr(), None, 0, None, x.numel(), call=f"launch_{kernel}")
        if partials is None:
            partials = torch.empty(blocks, dtype=torch.float32, device=x.device)
        check_output(partials, x, blocks, "partials")
        counter = torch.zeros(1, dtype=torch.int32, device=x.device)  # the launcher zeroes it again
        return self.launch("launch_reduce_variant", (x, out, partials, counter), variant,
                           x.data_ptr(), out.data_ptr(), partials.data_ptr(), partials.numel(),
                           counter.data_ptr(), x.numel(), call=f"launch_{kernel}")

    def sum(self, x, rung: str = "reduce6_grid_stride", *, out=None, partials=None):
        """Launch one rung on ``x`` and return ``out`` (a float32 tensor whose element 0 is the sum)."""
        torch = torch_module()
        out = torch.empty(1, dtype=torch.float32, device=x.device) if out is None else out
        self.bind(rung, x, out, partials)()
        return out

    def sum_poisoned(self, x, rung: str, canary: float = 12345.0) -> tuple[float, bool]:
        """One launch of ``rung`` into a poisoned output, for the correctness checks.

        ``out`` holds NaN (where the sum goes) then ``canary`` (which no launch may touch), and
        rung 6's workspace is all NaN, so an unwritten result or a stray write shows. Synchronizes,
        so that a fault inside the kernel surfaces here, and returns (the sum, canary intact).
        """
        torch = torch_module()
        out = torch.tensor([float("nan"), canary], device=x.device)
        grid = self.grid_size(rung if rung in SINGLE_KERNEL_VARIANTS else "reduce6_grid_stride")
        partials = torch.full((grid,), float("nan"), device=x.device)
        self.sum(x, rung, out=out, partials=partials)
        torch.cuda.synchronize(x.device)
        got, after = out.tolist()
        return got, after == canary

    def tree_blocks(self, rung: str, n: int) -> int:
        """Blocks (= partial sums) a tree rung (1 to 5) launches for ``n`` elements."""
        if rung not in TREE_RUNGS:
            raise ValueError(f"{rung!r} is not a tree rung: expected one of {', '.join(TREE_RUNGS)}")
        return int(self._tree_blocks(REDUCE_RUNGS.index(rung), n))

    def bind_block_sums(self, rung: str, x, partials) -> Callable[[], None]:
        """The diagnostic mode of a tree rung: block b stores its sum in ``partials[b]`` (no atomic,
        no second pass), so a timing measures the load and the tree alone."""
        self.tree_blocks(rung, 1)  # refuses a rung without a tree before anything else
        check_reduce_input(x)
        blocks = self.tree_blocks(rung, x.numel())
        check_output(partials, x, blocks, "partials")
        return self.launch("launch_reduce_block_sums", (x, partials), REDUCE_RUNGS.index(rung),
                           x.data_ptr(), partials.data_ptr(), partials.numel(), x.numel())

    def bind_copy(self, x, y) -> Callable[[], None]:
        """A no-argument launcher of the float4 copy ``y[:] = x`` (the ceiling for the ladder)."""
        check_reduce_input(x, vector=True)
        check_reduce_input(y, vector=True)
        if y.numel() != x.numel() or y.device != x.device:
            raise ValueError("y must have as many elements as x, on the same device")
        return self.launch("launch_copy_vec4", (x, y), x.data_ptr(), y.data_ptr(), x.numel())



NCU_REDUCE_METRICS = ncu.SHARED_METRICS + (
    "smsp__thread_inst_executed.sum",          # threads that executed each warp instruction ...
    "smsp__thread_inst_executed_pred_on.sum",  # ... and those whose predicate was true
    "smsp__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "dram__bytes_read.sum",
    "gpu__time_duration.sum",
)
#: The transposes add global-memory requests and sectors (the naive kernel's scattered stores).
