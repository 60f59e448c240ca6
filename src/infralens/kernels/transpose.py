"""The transposes of ``transpose.cu``, callable from Python: one kernel per tile layout.

``TransposeKernels().transpose(x, name)`` launches one kernel on a 2-D float32 CUDA tensor;
``copy_tile`` copies instead of transposing (the ceiling). Inputs are validated in Python first
(:func:`check_transpose_input`).
"""

from __future__ import annotations

from collections.abc import Callable

from infralens.kernels.library import INT, VOID_P, Library, check_output, torch_module
from infralens.tools import ncu, nvcc

#: The kernels of transpose.cu in the order it defines them, the numbers its launcher takes.
TRANSPOSE_KERNELS = (
    "copy_tile",
    "transpose_naive",
    "transpose_tile32",
    "transpose_tile33",
    "transpose_tile33_rows",
    "transpose_swizzle",
)
#: Two more shapes of the padded tile, after the ladder in transpose.cu (the launcher's numbers
#: continue): 32x16 threads with two loads each, and 32x32 threads with four loads each on a
#: 128x32 tile. They separate the loads each thread issues from the size of its block.
BLOCK_SHAPE_KERNELS = (
    "transpose_tile33_x16",
    "transpose_tile33_tall",
)
_ALL = TRANSPOSE_KERNELS + BLOCK_SHAPE_KERNELS


def check_transpose_input(x) -> None:
    """Raise TypeError/ValueError unless ``x`` is a non-empty, contiguous 2-D float32 CUDA tensor."""
    torch = torch_module()
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
    if x.dtype != torch.float32:
        raise TypeError(f"x must be float32, not {str(x.dtype).removeprefix('torch.')}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D (rows, cols), not {x.dim()}-D")
    if x.numel() == 0:
        raise ValueError("x is empty: there is nothing to transpose")
    if max(x.shape) >= 2**31:
        raise ValueError(f"x has {max(x.shape):,} rows or columns; the kernels index with int")
    if not x.is_contiguous():
        raise ValueError("x must be contiguous (call .contiguous() first)")
    if not x.is_cuda:
        raise ValueError(f"x must be on a CUDA device, not {x.device}")


class TransposeKernels(Library):
    """The transposes of ``transpose.cu``: ``kernels.transpose(x, name)`` for name in ``KERNELS``
    or :data:`BLOCK_SHAPE_KERNELS`.

    ``copy_tile`` is in the list too: it copies instead of transposing (the ceiling).
    """

    KERNELS = TRANSPOSE_KERNELS
    SOURCE = "transpose"

    def __init__(self, build_: nvcc.Build | None = None):
        super().__init__(build_)
        self._fn("launch_transpose", [INT, VOID_P, VOID_P, INT, INT, VOID_P])

    def bind(self, kernel: str, x, out) -> Callable[[], None]:
        if kernel not in _ALL:
            raise ValueError(f"unknown kernel {kernel!r}: expected one of {', '.join(_ALL)}")
        check_transpose_input(x)
        check_output(out, x, x.numel(), "out")
        rows, cols = x.shape
        return self.launch("launch_transpose", (x, out), _ALL.index(kernel),
                           x.data_ptr(), out.data_ptr(), rows, cols, call=f"launch_transpose({kernel})")

    def transpose(self, x, kernel: str = "transpose_tile33_rows", *, out=None):
        """``x.t()`` as a new (cols, rows) tensor (for ``copy_tile``: a (rows, cols) copy)."""
        torch = torch_module()
        if out is None:
            shape = tuple(x.shape) if kernel == "copy_tile" else tuple(x.shape)[::-1]
            out = torch.empty(shape, dtype=torch.float32, device=x.device)
        self.bind(kernel, x, out)()
        return out





NCU_TRANSPOSE_METRICS = ncu.SHARED_METRICS + (
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "gpu__time_duration.sum",
)
