"""Row softmax four ways: eager PyTorch, and three Triton kernels that read each row once.

Lab 06 reads this file top to bottom. ``naive_softmax`` is the baseline, written so that every
line carries its HBM traffic; :func:`softmax_bytes` turns that count into the speed-up fusion
should give before anything is measured. Then a ladder of kernels, each changing one idea:

1. :func:`softmax_row_kernel` – one program per row, the whole row in one block (masked);
2. :func:`softmax_online_kernel` – a row wider than one block: an online max and sum over
   blocks, then a second pass that writes (read twice, write once);
3. :func:`softmax_persistent_kernel` – the row kernel on a grid sized to the GPU, each
   program looping over rows, so that the loads of the next row overlap this row's math.

:func:`measure_softmax` times all of them, ``torch.softmax`` and a device copy in one run.
Every kernel runs on CPU tensors under ``TRITON_INTERPRET=1`` (set before ``triton`` is first
imported), so the CPU build and the tests check them against a float64 reference.
"""

from __future__ import annotations

import re

import torch
import triton
import triton.language as tl

from infralens.hardware import CC_LIMITS
from infralens.kernels.persistent_grid import compiled_programs_per_sm, programs_per_sm, supported_cc
from infralens.tools.bench import bench_ms
from infralens.tools.triton_compile import check_block, compile_offline, launched_resources

__all__ = [
    "naive_softmax", "softmax_bytes", "softmax_row_kernel", "softmax_online_kernel", "online_max_sum",
    "softmax_persistent_kernel", "softmax", "softmax_online", "softmax_persistent",
    "row_num_warps", "persistent_stages", "programs_per_sm", "persistent_grid",
    "expected_speedup", "measure_softmax", "measure_num_warps", "VARIANTS", "row_kernel_resources",
    "row_kernel_device_resources", "ptx_op_counts",
]


# [softmax:naive]
def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D ``x`` (M, N), one PyTorch op per line.

    Each op is its own kernel: it reads its inputs from HBM and writes its result back.
    The comments count elements moved (M rows, N columns).
    """
    row_max = x.amax(dim=1, keepdim=True)  # (M, 1)  read MN, write M
    shifted = x - row_max  # (M, N)  read MN + M, write MN
    numer = torch.exp(shifted)  # (M, N)  read MN, write MN
    denom = numer.sum(dim=1, keepdim=True)  # (M, 1)  read MN, write M
    return numer / denom  # (M, N)  read MN + M, write MN
    # total: read 5MN + 2M, write 3MN + 2M; a fused kernel reads MN and writes MN
# [/softmax:naive]


# [softmax:bytes]
def softmax_bytes(n_rows: int, n_cols: int, elem_bytes: int) -> dict[str, int]:
    """HBM bytes moved by :func:`naive_softmax` and by a fused kernel, from the counts above."""
    M, N = n_rows, n_cols
    naive = (5 * M * N + 2 * M) + (3 * M * N + 2 * M)  # elements read + written, five kernels
    fused = M * N + M * N  # read every element once, write every element once
    return {"naive": naive * elem_bytes, "fused": fused * elem_bytes}
# [/softmax:bytes]


# [softmax:row-kernel]
@triton.jit
def softmax_row_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # one program per row; int64: row * stride may pass 2**31
    cols = tl.arange(0, BLOCK_N)  # (BLOCK_N,) BLOCK_N = next power of 2 >= n_cols
    mask = cols < n_cols  # (BLOCK_N,) lanes past the end of the row are off
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))  # read N
    x = x.to(tl.float32)  # compute in fp32 whatever the storage type
    z = x - tl.max(x, axis=0)  # masked lanes: -inf - max = -inf
    numer = tl.exp(z)  # exp(-inf) = 0: masked lanes add nothing to the sum
    y = numer / tl.sum(numer, axis=0)
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)  # write N (cast to y's type)
# [/softmax:row-kernel]


# [softmax:row-launch]
def row_num_warps(block_n: int, elem_bytes: int) -> int:
    """Warps for one row held in registers: 32 bytes of the row per thread (two 16-byte loads)."""
    threads = block_n * elem_bytes // 32
    return min(32, max(1, threads // 32))  # a power of 2 from 1 to 32 warps


def _output_for(x: torch.Tensor) -> torch.Tensor:
    """An empty ``y`` like ``x`` for a launcher to fill, once ``x`` is checked: 2-D, rows contiguous."""
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D tensor (rows, cols), got shape {tuple(x.shape)}")
    if x.stride(1) != 1:
        raise ValueError("the last dimension must be contiguous")
    return torch.empty_like(x)


def _launch_per_row(kernel, x: torch.Tensor, *, num_warps: int | None = None,
                    max_block_n: int | None = None) -> torch.Tensor:
    """``kernel`` on a 2-D ``x``, one program per row; returns its output ``y``.

    ``BLOCK_N`` is the row's width rounded up to a power of two (at most ``max_block_n``, for a
    kernel that loops over the row in blocks); ``num_warps`` defaults to :func:`row_num_warps`.
    """
    y = _output_for(x)
    if x.numel() == 0:
        return y
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)  # the whole row in one block
    if max_block_n is not None:  # a kernel that streams the row: blocks of at most max_block_n
        block_n = min(block_n, max_block_n)
    if num_warps is None:
        num_warps = row_num_warps(block_n, x.element_size())
    kernel[(n_rows,)](x, y, x.stride(0), y.stride(0), n_cols, BLOCK_N=block_n, num_warps=num_warps)
    return y


def softmax(x: torch.Tensor, *, num_warps: int | None = None) -> torch.Tensor:
    """Row softmax of a 2-D tensor by :func:`softmax_row_kernel` (one program per row, the whole
    row in one block); ``num_warps`` defaults to :func:`row_num_warps`."""
    return _launch_per_row(softmax_row_kernel, x, num_warps=num_warps)
# [/softmax:row-launch]


# [softmax:online-kernel]
@triton.jit
def online_max_sum(x_row, n_cols, BLOCK_N: tl.constexpr):
    """The max of the first ``n_cols`` elements at ``x_row`` and the sum of exp(x - max), in one
    read of the row, ``BLOCK_N`` columns at a time."""
    cols = tl.arange(0, BLOCK_N)
    # Every lane keeps its own running max m and running sum l over the columns it sees,
    # rescaling l whenever its max grows.
    m = tl.full([BLOCK_N], -float("inf"), tl.float32)  # (BLOCK_N,) running max per lane
    l = tl.zeros([BLOCK_N], dtype=tl.float32)  # (BLOCK_N,) running sum of exp(x - m)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)  # a lane with no data yet
        l = l * tl.exp(m - m_safe) + tl.exp(x - m_safe)  # rescale the old sum, add the new
        m = m_new
    # Merge the lanes with the same rule: one max and one sum for the row.
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(l * tl.exp(m - row_max), axis=0)
    return row_max, row_sum


@triton.jit
def softmax_online_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_cols,
                          BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * x_row_stride
    y_row = y_ptr + row * y_row_stride
    cols = tl.arange(0, BLOCK_N)
    row_max, row_sum = online_max_sum(x_row, n_cols, BLOCK_N)  # pass 1: read N
    # Pass 2 (read N again, write N): normalize with the final max and sum.
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=-float("inf")).to(tl.float32)
        tl.store(y_row + start + cols, tl.exp(x - row_max) / row_sum, mask=mask)
# [/softmax:online-kernel]


def softmax_online(x: torch.Tensor, *, block_n: int = 4096, num_warps: int | None = None
                   ) -> torch.Tensor:
    """Row softmax by :func:`softmax_online_kernel`: any row width, ``block_n`` columns at a time."""
    return _launch_per_row(softmax_online_kernel, x, num_warps=num_warps, max_block_n=block_n)


# [softmax:persistent-kernel]
@triton.jit
def softmax_persistent_kernel(x_ptr, y_ptr, x_row_stride, y_row_stride, n_rows, n_cols,
                              BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    first = tl.program_id(0).to(tl.int64)  # int64 bounds make the loop variable int64
    step = tl.num_programs(0).to(tl.int64)  # the grid is sized to the GPU, not to the rows
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    # Rows first, first + step, ...; NUM_STAGES > 1 lets the compiler issue the next
    # row's loads before this row's reductions finish (software pipelining).
    for row in tl.range(first, n_rows, step, num_stages=NUM_STAGES):
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=-float("inf"))
        x = x.to(tl.float32)
        numer = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + row * y_row_stride + cols, numer / tl.sum(numer, axis=0), mask=mask)
# [/softmax:persistent-kernel]


# [softmax:persistent-launch]
def persistent_stages(row_bytes: int, limits) -> int:
    """Pipeline stages: three when two rows fit in one program's shared memory, else none."""
    return 3 if 2 * row_bytes <= limits.smem_per_block_max_bytes.value else 1


def persistent_grid(x: torch.Tensor, y: torch.Tensor, block_n: int, num_warps: int
                    ) -> tuple[int, int]:
    """(programs, num_stages) of :func:`softmax_persistent_kernel` for ``x``: one full wave.

    The kernel is compiled first (``warmup``, which launches nothing) and the SM count times the
    programs its registers and shared memory let one SM hold
    (:func:`~infralens.kernels.persistent_grid.programs_per_sm`) is the grid, as Triton's
    fused-softmax tutorial sizes it. Remembered per device, dtype, block and warps.
    """
    props = torch.cuda.get_device_properties(x.device)
    key = (x.device.index, x.dtype, block_n, num_warps)
    if key not in _GRIDS:
        cc = supported_cc(props.major, props.minor)
        num_stages = persistent_stages(block_n * x.element_size(), CC_LIMITS[cc])
        compiled = softmax_persistent_kernel.warmup(
            x, y, x.stride(0), y.stride(0), x.shape[0], x.shape[1], BLOCK_N=block_n,
            NUM_STAGES=num_stages, num_warps=num_warps, grid=(1,))
        per_sm = compiled_programs_per_sm(compiled, num_warps, cc)
        _GRIDS[key] = (props.multi_processor_count * per_sm, num_stages)
    return _GRIDS[key]


_GRIDS: dict[tuple, tuple[int, int]] = {}


def softmax_persistent(x: torch.Tensor) -> torch.Tensor:
    """Row softmax by :func:`softmax_persistent_kernel` on a grid that just fills the GPU
    (under the interpreter, on the CPU: four programs)."""
    y = _output_for(x)
    if x.numel() == 0:
        return y
    n_rows, n_cols = x.shape
    block_n = triton.next_power_of_2(n_cols)
    num_warps = row_num_warps(block_n, x.element_size())
    grid, num_stages = persistent_grid(x, y, block_n, num_warps) if x.is_cuda else (4, 1)
    softmax_persistent_kernel[(min(n_rows, grid),)](x, y, x.stride(0), y.stride(0), n_rows, n_cols,
                                                    BLOCK_N=block_n, NUM_STAGES=num_stages,
                                                    num_warps=num_warps)  # each program loops
    return y
# [/softmax:persistent-launch]


#: The variants :func:`measure_softmax` times, by name.
VARIANTS = ("naive", "torch", "triton_row", "triton_online", "triton_persistent", "copy")


# [softmax:measure]
def measure_softmax(widths: list[int], dtypes: list[torch.dtype], *, total_bytes: int = 2**28,
                    online_block: int = 4096, warmup_ms: int = 25, rep_ms: int = 100) -> dict:
    """Time every variant at each row width N with the input fixed at ``total_bytes``.

    GB/s counts the bytes a fused softmax must move, read once and written once
    (2 * M * N * element size), for every variant, so the naive baseline's extra traffic shows
    up as a lower rate. ``copy`` is ``Tensor.copy_`` of the same tensor: the same bytes with
    no math, the ceiling for a memory-bound kernel. Each variant is checked against a float64
    softmax before it is timed.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    variants = {
        "naive": naive_softmax,
        "torch": lambda x: torch.softmax(x, dim=1),
        "triton_row": softmax,
        "triton_online": lambda x: softmax_online(x, block_n=online_block),
        "triton_persistent": softmax_persistent,
    }
    out: dict = {"total_bytes": total_bytes, "online_block": online_block,
                 "device": torch.cuda.get_device_name(), "dtypes": {}}
    for dtype in dtypes:
        elem = torch.empty((), dtype=dtype).element_size()
        table: dict = {"N": [], "M": [], "gbps": {v: [] for v in VARIANTS},
                       "ms": {v: [] for v in VARIANTS}, "max_abs_err": {v: [] for v in variants}}
        for n_cols in widths:
            n_rows = total_bytes // (n_cols * elem)
            x = torch.randn(n_rows, n_cols, device="cuda").to(dtype)
            ref = torch.softmax(x[:256].double(), dim=1)  # float64 reference on 256 rows
            y = torch.empty_like(x)
            table["N"].append(n_cols)
            table["M"].append(n_rows)
            moved = 2 * n_rows * n_cols * elem  # read once + write once
            for name, fn in variants.items():
                err = (fn(x)[:256].double() - ref).abs().max().item()
                table["max_abs_err"][name].append(err)
            timed = {**{n: (lambda fn=fn, x=x: fn(x)) for n, fn in variants.items()},
                     "copy": lambda x=x, y=y: y.copy_(x)}
            for name, fn in timed.items():
                ms = bench_ms(fn, warmup_ms=warmup_ms, rep_ms=rep_ms)
                table["ms"][name].append(ms)
                table["gbps"][name].append(moved / (ms * 1e-3) / 1e9)
            del x, y, ref, timed
            torch.cuda.empty_cache()
        out["dtypes"][str(dtype).removeprefix("torch.")] = table
    return out


def measure_num_warps(widths: list[int], dtypes: list[torch.dtype], warps: list[int], *,
                      total_bytes: int = 2**28, max_per_thread: int = 64, warmup_ms: int = 25,
                      rep_ms: int = 100) -> dict:
    """Time :func:`softmax` at each row width with every ``num_warps`` in ``warps`` (a scan of the
    one launch knob), with the input fixed at ``total_bytes`` as in :func:`measure_softmax`, a
    device copy of the same tensor timed in the same run, and ``row_num_warps``'s own choice.
    Rates count the bytes a fused softmax moves; entries are keyed by ``str(num_warps)``.

    Counts that leave more than ``max_per_thread`` row elements to a thread are skipped (their
    registers would spill); a count that fails or gives a wrong result is ``None``, with the
    reason in ``errors``. The registers spilled by each compiled kernel are recorded too.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    out: dict = {"total_bytes": total_bytes, "warps": list(warps),
                 "device": torch.cuda.get_device_name(), "dtypes": {}}
    for dtype in dtypes:
        elem = torch.empty((), dtype=dtype).element_size()
        table: dict = {"N": [], "chosen": [], "copy_gbps": [], "gbps": {str(w): [] for w in warps},
                       "spills": {str(w): [] for w in warps}, "errors": {}}
        for n_cols in widths:
            n_rows = total_bytes // (n_cols * elem)
            x = torch.randn(n_rows, n_cols, device="cuda").to(dtype)
            y = torch.empty_like(x)
            ref = torch.softmax(x[:256].double(), dim=1)
            moved = 2 * n_rows * n_cols * elem
            table["N"].append(n_cols)
            table["chosen"].append(row_num_warps(triton.next_power_of_2(n_cols), elem))
            copy_ms = bench_ms(lambda x=x, y=y: y.copy_(x), warmup_ms=warmup_ms, rep_ms=rep_ms)
            table["copy_gbps"].append(moved / (copy_ms * 1e-3) / 1e9)
            for w in warps:
                try:
                    per_thread = triton.next_power_of_2(n_cols) // (w * 32)
                    if per_thread > max_per_thread:
                        raise ValueError(f"{per_thread} elements per thread > {max_per_thread}")
                    err = (softmax(x, num_warps=w)[:256].double() - ref).abs().max().item()
                    if not err < 1e-2:  # a wrong result is not a timing
                        raise RuntimeError(f"max abs error {err:.1e} against float64")
                    ms = bench_ms(lambda w=w, x=x: softmax(x, num_warps=w), warmup_ms=warmup_ms,
                                  rep_ms=rep_ms)
                    table["gbps"][str(w)].append(moved / (ms * 1e-3) / 1e9)
                    res = row_kernel_device_resources([n_cols], dtype, num_warps=w)[0]
                    table["spills"][str(w)].append(res["spills"])
                except Exception as exc:  # noqa: BLE001 - recorded, not raised: the scan goes on
                    table["gbps"][str(w)].append(None)
                    table["spills"][str(w)].append(None)
                    table["errors"][f"{n_cols}/{w}"] = str(exc).splitlines()[0][:200]
            del x, y, ref
            torch.cuda.empty_cache()
        out["dtypes"][str(dtype).removeprefix("torch.")] = table
    return out
# [/softmax:measure]


def expected_speedup(n_cols: int) -> float:
    """Bytes of the naive softmax over bytes of the fused one, for rows of ``n_cols``."""
    b = softmax_bytes(1, n_cols, 1)
    return b["naive"] / b["fused"]



# [softmax:compile]
def row_kernel_resources(block_n: int, dtype: str = "bf16") -> dict:
    """Registers and shared memory of :func:`softmax_row_kernel` as :func:`softmax` launches it."""
    check_block("BLOCK_N", block_n)
    signature = {"x_ptr": f"*{dtype}", "y_ptr": f"*{dtype}", "x_row_stride": "i32",
                 "y_row_stride": "i32", "n_cols": "i32", "BLOCK_N": "constexpr"}
    elem = {"bf16": 2, "fp16": 2, "fp32": 4}[dtype]
    num_warps = row_num_warps(block_n, elem)
    out = compile_offline(softmax_row_kernel, signature, {"BLOCK_N": block_n}, num_warps=num_warps)
    return {"block_n": block_n, "dtype": dtype, "num_warps": num_warps,
            "registers": out["registers"], "shared_bytes": out["shared_bytes"],
            "vector_loads": out["ptx"].count("ld.global.v4"),  # 16-byte loads in the PTX
            "ptx_ops": ptx_op_counts(out["ptx"]), "triton": triton.__version__}


def ptx_op_counts(ptx: str) -> dict[str, int]:
    """How often each PTX instruction occurs in ``ptx`` (the opcode with its type and modifiers,
    ``ex2.approx.f32``; a predicate guard is left out), for reading what an operation compiled to."""
    counts: dict[str, int] = {}
    for line in ptx.splitlines():
        m = re.match(r"\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9_.]*)[\s;]", line)
        if m and not line.lstrip().startswith((".", "//")):
            counts[m.group(1)] = counts.get(m.group(1), 0) + 1
    return dict(sorted(counts.items()))


def row_kernel_device_resources(widths: list[int], dtype: torch.dtype = torch.bfloat16, *,
                                num_warps: int | None = None) -> list[dict]:
    """Registers and shared memory of :func:`softmax_row_kernel` as the installed Triton compiled
    it for this GPU, launched as :func:`softmax` launches it for rows of each width.

    The counts are read from the compiled kernel that the launch returns, so they come from the
    Triton version that ran the measurements (the offline :func:`row_kernel_resources` uses the
    version installed where the book is built).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    rows = []
    for n_cols in widths:
        x = torch.randn(2, n_cols, device="cuda").to(dtype)
        y = torch.empty_like(x)
        block_n = triton.next_power_of_2(n_cols)
        warps = row_num_warps(block_n, x.element_size()) if num_warps is None else num_warps
        compiled = softmax_row_kernel[(2,)](x, y, x.stride(0), y.stride(0), n_cols,
                                            BLOCK_N=block_n, num_warps=warps)
        torch.cuda.synchronize()
        rows.append({"n_cols": n_cols, "block_n": block_n, "dtype": str(dtype).removeprefix("torch."),
                     "num_warps": warps, **launched_resources(compiled),
                     "triton": triton.__version__})
    return rows
# [/softmax:compile]


def _main(argv: list[str] | None = None) -> int:
    from infralens.tools.cli import OneLineParser, positive_int
    from infralens.tools.triton_compile import compile_command

    parser = OneLineParser(
        prog="python -m infralens.kernels.triton_softmax",
        description="Compile the row-softmax kernel for sm_90 offline and report its resources.")
    parser.add_argument("--block", type=positive_int, action="append", default=[], metavar="BLOCK_N")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    return compile_command(  # compiling fails on a bad size too
        parser, argv, each="block", wanted="--block BLOCK_N (a power of two)",
        check=lambda args, block: check_block("BLOCK_N", block),
        compile_all=lambda args: [row_kernel_resources(block, args.dtype) for block in args.block])


if __name__ == "__main__":
    raise SystemExit(_main())
