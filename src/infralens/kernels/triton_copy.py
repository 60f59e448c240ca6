"""The smallest useful Triton kernel: a masked 1-D copy, and a bandwidth measurement.

Each program instance copies one block of ``BLOCK_SIZE`` elements; the mask turns off the
lanes past the end, so any length works. :func:`repeat_read_kernel` reads a buffer over and
over from L2 (``.cg`` loads ask to be cached in L2 only), for :mod:`infralens.gpuarch.cache_sweep`. In the CPU
build (``TRITON_INTERPRET=1``, which must be set before ``triton`` is imported) the same kernels
run in Triton's interpreter on CPU tensors.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infralens.tools.bench import bench_ms


# [copy:kernel]
@triton.jit
def copy_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)  # which block this program instance handles
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # (BLOCK_SIZE,) element indices
    mask = offsets < n_elements  # (BLOCK_SIZE,) False past the end of the tensor
    x = tl.load(x_ptr + offsets, mask=mask)  # masked lanes are not read
    tl.store(y_ptr + offsets, x, mask=mask)  # ... and not written


def copy(x: torch.Tensor, *, block_size: int = 1024) -> torch.Tensor:
    """Return a copy of ``x`` made by :func:`copy_kernel` (any shape, copied as flat 1-D)."""
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    if n == 0:
        return y
    grid = (triton.cdiv(n, block_size),)  # one program per block, the last one partial
    copy_kernel[grid](x, y, n, BLOCK_SIZE=block_size)
    return y
# [/copy:kernel]


# [copy:bandwidth]
def measure_copy_bandwidth(
    n_bytes: int,
    *,
    dtype: torch.dtype = torch.float32,
    block_size: int = 1024,
    device: str = "cuda",
    warmup_ms: int = 25,
    rep_ms: int = 100,
) -> dict:
    """Device-to-device copy bandwidth of the Triton kernel and of ``Tensor.copy_``.

    Times with ``triton.testing.do_bench`` (CUDA events, L2 flushed between runs, median
    in ms). A copy reads and writes every byte, so GB/s = 2 * bytes / time / 1e9.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    elem = torch.empty((), dtype=dtype).element_size()
    n = max(1, n_bytes // elem)
    x = torch.randn(n, device=device).to(dtype)
    y = torch.empty_like(x)

    def triton_copy() -> None:
        copy_kernel[(triton.cdiv(n, block_size),)](x, y, n, BLOCK_SIZE=block_size)

    def torch_copy() -> None:
        y.copy_(x)

    moved = 2 * n * elem  # bytes read + bytes written
    out = {"n_bytes": n * elem, "dtype": str(dtype).removeprefix("torch."),
           "block_size": block_size, "device": torch.cuda.get_device_name(x.device)}
    for name, fn in (("triton", triton_copy), ("torch", torch_copy)):
        ms = bench_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
        out[name] = {"ms": ms, "gbps": moved / (ms * 1e-3) / 1e9}
    triton_copy()
    out["triton_matches"] = bool(torch.equal(x, y))
    return out
# [/copy:bandwidth]


# [copy:repeat-read]
@triton.jit
def repeat_read_kernel(x_ptr, out_ptr, n_blocks, reads_per_program, BLOCK_SIZE: tl.constexpr):
    """Each program reads ``reads_per_program`` blocks of ``x`` and writes the sum of what it read.

    Read i of program p is block (p + i * programs) mod ``n_blocks``: at every step the programs
    together read consecutive blocks, and the reads wrap around the buffer as often as the count
    asks. The loads are ``.cg``, which asks for caching in L2 only, so a buffer that fits in L2
    is read from L2 rather than from an SM's L1."""
    pid = tl.program_id(axis=0)
    programs = tl.num_programs(axis=0)
    acc = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    for i in range(reads_per_program):
        block = (pid + i * programs) % n_blocks
        offsets = block.to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + offsets, cache_modifier=".cg")
    tl.store(out_ptr + pid, tl.sum(acc, axis=0))  # one float per program keeps the loads live
# [/copy:repeat-read]
