"""Which CUDA kernel ``torch.softmax`` runs for rows of N elements: ATen's dispatch, in code.

``host_softmax`` in PyTorch's ``aten/src/ATen/native/cuda/SoftMax.cu`` chooses, for a softmax
over the last (contiguous) dimension, between a warp-per-row kernel and three block-per-row
kernels, by the row width and the element size alone:

1. ``softmax_warp_forward`` (``PersistentSoftmax.cuh``) for rows of at most 2,048 elements and
   8 KiB: one warp per row (two rows per warp up to 128 elements), four warps per 128-thread
   block; each lane holds ``next_power_of_2(N) / 32`` elements of the row in registers, loaded one
   element per lane per instruction (a warp reads 32 consecutive elements at a time).
2. One block per row otherwise, of ``min(N, 1024)`` threads rounded up to whole warps, and:

   a. ``cunn_SoftMaxForwardReg`` while each thread holds fewer than ten elements
      (``ceil(N / threads) < 10``): the row in registers, read once;
   b. ``cunn_SoftMaxForwardSmem`` while the row fits in the shared memory a block gets without
      opting in (``sharedMemPerBlock``, 48 KiB, less one float per warp for the reductions), input
      and output are 16-byte aligned and N is a multiple of the 16-byte vector: the row is copied
      to shared memory during the first pass and read from there by the other two;
   c. ``cunn_SoftMaxForward`` beyond: no copy of the row on chip, so the max, the sum of
      exponentials and the normalization each read the row from global memory, three reads and
      one write, the third read and the write vectorized.

:func:`aten_softmax_path` returns that choice; the thresholds are the source's, and a GPU cell
of Lab 06 checks them against the kernel names the profiler records.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AtenSoftmaxPath", "aten_softmax_path", "WARP_PATH_MAX_ELEMENTS", "WARP_PATH_MAX_BYTES",
           "REG_PATH_MAX_PER_THREAD", "BLOCK_MAX_THREADS"]

WARP = 32
#: ``host_softmax``: ``dim_size <= 2048 && dim_size * sizeof(scalar_t) <= 8192`` takes the warp path.
WARP_PATH_MAX_ELEMENTS = 2048
WARP_PATH_MAX_BYTES = 8192
#: ``potential_reg_cnt < 10``: the register path while a thread holds at most nine elements.
REG_PATH_MAX_PER_THREAD = 9
#: ``SoftMaxForward_getBlockSize``: at most ``max_threads = 1024`` threads per row's block.
BLOCK_MAX_THREADS = 1024


@dataclass(frozen=True)
class AtenSoftmaxPath:
    """One row width's kernel: its name, threads per row, elements per thread, the reads of the
    row from global memory, and the dynamic shared memory per block (bytes)."""

    kernel: str
    threads_per_row: int
    elements_per_thread: int
    row_reads: int
    shared_bytes: int


# [aten-softmax:dispatch]
def aten_softmax_path(n_cols: int, elem_bytes: int, *, shared_per_block: int = 48 * 1024,
                      aligned: bool = True) -> AtenSoftmaxPath:
    """The kernel ``torch.softmax(x, dim=-1)`` launches on CUDA for contiguous rows of ``n_cols``
    elements of ``elem_bytes`` each (the choice of ``host_softmax`` in ATen's ``SoftMax.cu``).

    ``shared_per_block`` is the device's ``sharedMemPerBlock`` (48 KiB on every GPU since Volta);
    ``aligned``: input and output start on 16-byte boundaries (a fresh tensor does).
    """
    if n_cols < 1 or elem_bytes not in (2, 4, 8):
        raise ValueError(f"need n_cols >= 1 and a 2-, 4- or 8-byte element, got {n_cols}, {elem_bytes}")
    if n_cols <= WARP_PATH_MAX_ELEMENTS and n_cols * elem_bytes <= WARP_PATH_MAX_BYTES:
        padded = 1 << (n_cols - 1).bit_length()  # next power of two
        lanes = min(padded, WARP)
        return AtenSoftmaxPath("softmax_warp_forward", lanes, padded // lanes, 1, 0)
    threads = -(-min(n_cols, BLOCK_MAX_THREADS) // WARP) * WARP
    per_thread = -(-n_cols // threads)
    reduction = threads // WARP * (8 if elem_bytes == 8 else 4)  # one accumulator per warp
    if per_thread <= REG_PATH_MAX_PER_THREAD:
        return AtenSoftmaxPath("cunn_SoftMaxForwardReg", threads, per_thread, 1, reduction)
    vector = 16 // elem_bytes  # ILP: elements per 16-byte vector
    if (n_cols < (shared_per_block - reduction) // elem_bytes and aligned
            and n_cols % vector == 0):
        return AtenSoftmaxPath("cunn_SoftMaxForwardSmem", threads, per_thread, 1,
                               n_cols * elem_bytes + reduction)
    return AtenSoftmaxPath("cunn_SoftMaxForward", threads, per_thread, 3, reduction)
# [/aten-softmax:dispatch]


def profiled_softmax_kernels(widths: list[int], dtypes: list, *, rows: int = 512) -> list[dict]:
    """The kernel ``torch.softmax(x, dim=-1)`` actually launches on this GPU for each width and
    dtype, as PyTorch's profiler traces it (name, block, dynamic shared memory, registers), next to
    :func:`aten_softmax_path`'s prediction: the check of this module against the installed PyTorch."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    shared = torch.cuda.get_device_properties(0).shared_memory_per_block
    out = []
    for dtype in dtypes:
        for n in widths:
            x = torch.randn(rows, n, device="cuda").to(dtype)
            torch.softmax(x, dim=-1)  # warm-up: lazy initialization stays out of the trace
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                torch.softmax(x, dim=-1)
                torch.cuda.synchronize()
            with tempfile.NamedTemporaryFile(suffix=".json") as trace:
                prof.export_chrome_trace(trace.name)
                events = json.load(open(trace.name))["traceEvents"]
            kernels = [e for e in events if e.get("cat") == "kernel"]
            want = aten_softmax_path(n, x.element_size(), shared_per_block=shared)
            got = kernels[0] if len(kernels) == 1 else None
            args = got["args"] if got else {}
            out.append({"dtype": str(dtype).removeprefix("torch."), "n_cols": n,
                        "kernel": got["name"] if got else [k["name"] for k in kernels],
                        "block": args.get("block"), "registers": args.get("registers per thread"),
                        "shared_bytes": args.get("shared memory"), "predicted": want.kernel,
                        "predicted_shared_bytes": want.shared_bytes,
                        "match": bool(got) and want.kernel in got["name"]
                        and args.get("shared memory") == want.shared_bytes})
            del x
    return out
