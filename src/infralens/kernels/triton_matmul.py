"""Matrix multiplication in Triton: one output tile per program, programs ordered in groups so that
neighbours share their inputs in L2, tile shapes chosen by ``@triton.autotune``.

``C = A @ B`` with ``A`` (M, K) and ``B`` (K, N). Every program owns a ``BLOCK_M x BLOCK_N`` tile of
``C``: it walks ``K`` in steps of ``BLOCK_K``, loading one tile of ``A`` and one of ``B`` per step
and accumulating their product in FP32 with ``tl.dot`` (the Tensor Cores), then writes its tile once.
Two kernels share that loop and differ in how a tile reaches the SM:

* :func:`matmul_kernel` computes a pointer for every element of a tile and loads with
  ``tl.load``; any strides, any alignment.
* :func:`matmul_tma_kernel` describes each operand once (:class:`TensorDescriptor`: base, shape,
  strides, tile shape) and asks for a tile by its coordinates; on sm_90 the copy is done by the
  Tensor Memory Accelerator, and the rows past the edge of the matrix come back as zeros. The
  descriptor needs 16-byte aligned strides.

Both take BF16/FP16 operands, or FP8 E4M3 operands with one FP32 scale per tensor (applied once to
the accumulator, as ``torch._scaled_mm`` does). :func:`tile_of` is the launch order both use;
:func:`launch_order` runs it to show which tile each program gets. :func:`matmul` picks tile shapes
from :data:`MATMUL_CONFIGS` (or :data:`FP8_CONFIGS`) by timing them on the first call of each
shape on a GPU; under ``TRITON_INTERPRET=1`` it runs one small config on CPU tensors, with BF16
operands widened to FP32 first (the interpreter of Triton 3.9 multiplies BF16 tiles wrongly).
:func:`measure_matmul` times both kernels against cuBLAS in one run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from infralens.tools.triton_compile import interpreting

__all__ = ["tile_of", "tile_order_kernel", "launch_order", "wave_tiles", "matmul_kernel",
           "matmul_tma_kernel", "matmul", "MATMUL_CONFIGS", "FP8_CONFIGS", "GROUP_M", "INTERPRET_CONFIG",
           "matmul_flops", "measure_matmul", "TMA_ALIGN_BYTES", "PTX_MARKERS", "matmul_resources", "main",
           "dram_read_model", "profile_group_order", "ORDER_NCU_METRICS", "CHECK_SHAPES",
           "CHECK_TOLERANCE", "matmul_errors", "tma_tile_product", "check_tma_rows",
           "tma_configs"]

#: The TMA unit copies rows whose strides are multiples of 16 bytes.
TMA_ALIGN_BYTES: int = 16


# [matmul:grouped-order]
@triton.jit
def tile_of(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """The (row, column) tile of C that program ``pid`` computes.

    Programs are numbered in launch order. Row-major order would give consecutive programs a row
    of tiles: they share one block of A's rows and each needs a different block of B's columns.
    Here consecutive programs go down a column of ``GROUP_M`` tiles first, then move one column
    right: a group of ``GROUP_M x tiles_n`` programs reuses ``GROUP_M`` row blocks of A and, while
    it is in flight, a few column blocks of B, so both stay in L2.
    """
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n  # programs in one group of GROUP_M tile rows
    group = pid // per_group
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)  # the last group may be shorter
    local = pid % per_group
    return first_m + local % rows_in_group, local // rows_in_group
# [/matmul:grouped-order]


@triton.jit
def tile_order_kernel(out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      GROUP_M: tl.constexpr):
    """Write the tile of every program: ``out[pid] = (row tile, column tile)``."""
    pid = tl.program_id(0)
    pid_m, pid_n = tile_of(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    tl.store(out_ptr + 2 * pid, pid_m)
    tl.store(out_ptr + 2 * pid + 1, pid_n)


def launch_order(M: int, N: int, block_m: int, block_n: int, group_m: int) -> list[tuple[int, int]]:
    """The (row tile, column tile) of each program in launch order, as :func:`tile_of` assigns them
    (run on a GPU if there is one, else in Triton's interpreter)."""
    for name, value in (("M", M), ("N", N), ("block_m", block_m), ("block_n", block_n),
                        ("group_m", group_m)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} {value!r}: must be a positive integer")
    programs = triton.cdiv(M, block_m) * triton.cdiv(N, block_n)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    out = torch.empty(programs, 2, dtype=torch.int32, device=device)
    tile_order_kernel[(programs,)](out, M, N, BLOCK_M=block_m, BLOCK_N=block_n, GROUP_M=group_m)
    return [tuple(pair) for pair in out.tolist()]


def wave_tiles(order: list[tuple[int, int]], wave: int) -> list[dict]:
    """For each wave of ``wave`` consecutive programs: how many distinct row blocks of A and column
    blocks of B it reads, and the tiles of input it loads in all (each program loads one row block
    and one column block). The ratio is the reuse a cache shared by the wave could give."""
    if wave < 1:
        raise ValueError(f"wave {wave}: must be at least 1")
    waves = []
    for start in range(0, len(order), wave):
        chunk = order[start:start + wave]
        a_blocks, b_blocks = {m for m, _ in chunk}, {n for _, n in chunk}
        waves.append({"programs": len(chunk), "a_blocks": len(a_blocks), "b_blocks": len(b_blocks),
                      "blocks_loaded": 2 * len(chunk)})
    return waves


# [matmul:dram-model]
def dram_read_model(M: int, N: int, K: int, block_m: int, block_n: int, group_m: int, wave: int,
                    elem_bytes: int) -> int:
    """Bytes of A and B read from HBM if the programs run in waves of ``wave`` (SMs times programs
    per SM) in launch order, all programs of a wave step through K together, and the cache keeps
    what one wave shares but nothing from one wave to the next: every wave reads each distinct
    row block of A and column block of B it touches once, in full."""
    order = launch_order(M, N, block_m, block_n, group_m)
    return sum((w["a_blocks"] * block_m + w["b_blocks"] * block_n) * K * elem_bytes
               for w in wave_tiles(order, wave))
# [/matmul:dram-model]


# [matmul:kernel]
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, scale_a_ptr, scale_b_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, SCALED: tl.constexpr, EVEN_K: tl.constexpr):
    pid_m, pid_n = tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    # Rows and columns of this tile. Past the edge they wrap around (% M, % N): those loads read
    # real, in-bounds elements whose products land in rows and columns the store masks off.
    rows = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M  # (BLOCK_M,)
    cols = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)  # (BLOCK_K,)
    a_ptrs = a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak  # (BLOCK_M, BLOCK_K)
    b_ptrs = b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        if EVEN_K:  # K a multiple of BLOCK_K: no mask in the loop
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:  # the last step reads zeros past K, which add nothing to the sum
            a = tl.load(a_ptrs, mask=ks[None, :] < K - k * BLOCK_K, other=0.0)
            b = tl.load(b_ptrs, mask=ks[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)  # Tensor Cores, FP32 accumulator
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    if SCALED:  # FP8: C = (sa * A8) (sb * B8) = sa * sb * (A8 B8), one multiply per output
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    out_rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # unwrapped, for the store mask
    out_cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + out_rows[:, None] * stride_cm + out_cols[None, :] * stride_cn
    mask = (out_rows[:, None] < M) & (out_cols[None, :] < N)
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)
# [/matmul:kernel]


# [matmul:tma-kernel]
@triton.jit
def tma_tile_product(a_desc, b_desc, off_m, off_n, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                     BLOCK_K: tl.constexpr, B_KMAJOR: tl.constexpr):
    """The FP32 product of the ``BLOCK_M`` rows of A from ``off_m`` and the ``BLOCK_N`` columns of
    B from ``off_n``, over all of K: the main loop every TMA-descriptor matmul kernel shares."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])  # (BLOCK_M, BLOCK_K); zeros past the edges
        if B_KMAJOR:  # B stored as B^T (N, K): ask for a (BLOCK_N, BLOCK_K) tile, use its transpose
            b = b_desc.load([off_n, k * BLOCK_K]).T
        else:
            b = b_desc.load([k * BLOCK_K, off_n])  # (BLOCK_K, BLOCK_N)
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, scale_a_ptr, scale_b_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, SCALED: tl.constexpr, B_KMAJOR: tl.constexpr):
    pid_m, pid_n = tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tma_tile_product(a_desc, b_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K, B_KMAJOR)
    if SCALED:
        acc = acc * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    c_desc.store([off_m, off_n], acc.to(c_desc.dtype))  # the edges are clipped by the TMA unit
# [/matmul:tma-kernel]


# [matmul:configs]
#: Tile shapes autotune tries for 16-bit inputs: (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps).
MATMUL_CONFIGS: list[tuple[int, ...]] = [
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 128, 64, 4, 4), (128, 128, 64, 4, 8),
    (128, 256, 64, 4, 8), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4), (128, 128, 32, 4, 4)]
#: FP8 inputs are half the bytes per element: the same bytes per stage hold twice the K.
FP8_CONFIGS: list[tuple[int, ...]] = [
    (128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (128, 128, 128, 4, 4), (128, 128, 128, 4, 8),
    (128, 256, 128, 4, 8), (128, 64, 128, 4, 4), (64, 128, 128, 4, 4)]
#: GROUP_M of every config: tile rows per group in the launch order.
GROUP_M: int = 8
#: The one config the interpreter runs (small tiles, so the CPU build stays fast).
INTERPRET_CONFIG: dict = {"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32, "GROUP_M": 4}
# [/matmul:configs]


def _configs(shapes: list[tuple[int, ...]], pre_hook=None) -> list[triton.Config]:
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M},
                          num_stages=stages, num_warps=warps, pre_hook=pre_hook)
            for bm, bn, bk, stages, warps in shapes]


def _set_tile_shapes(nargs: dict) -> None:
    """Before a config runs: give each tensor descriptor that config's tile shape."""
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_KMAJOR"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


def tma_configs(tiles: dict, shapes: list[tuple[int, ...]] | None = None, extra: list[dict] | None = None
                ) -> list[triton.Config]:
    """Autotune configs for a kernel that takes tensor descriptors: each tile shape of ``shapes``
    (default :data:`MATMUL_CONFIGS`) with each dict of constexprs in ``extra`` (default one empty
    dict), with a hook that gives every descriptor named in ``tiles`` its tile shape for the
    config: ``tiles`` maps a descriptor's name to a function of the launch's arguments,
    ``{"x_desc": lambda a: [a["BLOCK_M"], a["BLOCK_K"]], ...}``."""
    def set_shapes(nargs: dict) -> None:
        for name, shape_of in tiles.items():
            nargs[name].block_shape = shape_of(nargs)

    return [triton.Config({**cfg.kwargs, **more}, num_stages=cfg.num_stages, num_warps=cfg.num_warps,
                          pre_hook=set_shapes)
            for cfg in _configs(shapes or MATMUL_CONFIGS) for more in (extra or [{}])]


_KEY = ["M", "N", "K", "SCALED"]
#: K % BLOCK_K == 0 lets the pointer kernel drop its K mask; set for each config autotune tries.
_even_k = triton.heuristics({"EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0})
_tuned = {
    "pointer": {fp8: triton.autotune(_configs(shapes), key=_KEY)(_even_k(matmul_kernel))
                for fp8, shapes in ((False, MATMUL_CONFIGS), (True, FP8_CONFIGS))},
    "tma": {fp8: triton.autotune(_configs(shapes, _set_tile_shapes), key=_KEY)(matmul_tma_kernel)
            for fp8, shapes in ((False, MATMUL_CONFIGS), (True, FP8_CONFIGS))},
}


def _check(a: torch.Tensor, b: torch.Tensor, scale_a, scale_b, kernel: str) -> bool:
    """Refuse what the kernels cannot do, in one line; return whether the inputs are FP8."""
    if kernel not in _tuned:
        raise ValueError(f"kernel {kernel!r}: must be one of {sorted(_tuned)}")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"shapes {tuple(a.shape)} @ {tuple(b.shape)}: need (M, K) @ (K, N)")
    if min(*a.shape, b.shape[1]) < 1:
        raise ValueError(f"shapes {tuple(a.shape)} @ {tuple(b.shape)}: every dimension must be positive")
    if a.dtype != b.dtype or a.device != b.device:
        raise ValueError(f"operands differ: {a.dtype} on {a.device} and {b.dtype} on {b.device}")
    fp8 = a.dtype == torch.float8_e4m3fn
    if not fp8 and a.dtype not in (torch.bfloat16, torch.float16, torch.float32):
        raise ValueError(f"dtype {a.dtype}: must be bfloat16, float16, float32 or float8_e4m3fn")
    if fp8 != (scale_a is not None and scale_b is not None):
        raise ValueError("FP8 operands need scale_a and scale_b (and other types take none)")
    if max(a.numel(), b.numel(), a.shape[0] * b.shape[1]) >= 2**31:
        raise ValueError("more than 2**31 elements in one operand: the kernels index with int32")
    if kernel == "tma":
        if a.stride(1) != 1:
            raise ValueError("a: the TMA kernel needs a row-major A")
        if b.stride(1) != 1 and b.stride(0) != 1:
            raise ValueError("b: the TMA kernel needs a row-major or column-major B")
        for name, t in (("a", a), ("b", b)):
            check_tma_rows(name, t)
    return fp8


def check_tma_rows(name: str, t: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every row of the 2-D ``t`` (or of its transpose, for a
    column-major ``t``) starts on a :data:`TMA_ALIGN_BYTES` boundary, as a tensor descriptor needs."""
    if max(t.stride()) * t.element_size() % TMA_ALIGN_BYTES:
        raise ValueError(f"{name}: the TMA kernel needs rows that start on {TMA_ALIGN_BYTES}-byte "
                         f"boundaries (stride {max(t.stride())} elements)")


# [matmul:launch]
def matmul(a: torch.Tensor, b: torch.Tensor, *, scale_a: torch.Tensor | None = None,
           scale_b: torch.Tensor | None = None, out_dtype: torch.dtype | None = None,
           kernel: str = "pointer", config: dict | None = None) -> torch.Tensor:
    """``a @ b`` by one of the two kernels (``"pointer"`` or ``"tma"``).

    FP8 E4M3 operands take FP32 scalar tensors ``scale_a`` and ``scale_b`` and give
    ``scale_a * scale_b * (a @ b)`` in ``out_dtype`` (BF16 by default). ``config`` fixes the tile
    shape (a dict of BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, and optionally num_warps, num_stages);
    without it, a GPU autotunes and the interpreter runs :data:`INTERPRET_CONFIG`.
    """
    fp8 = _check(a, b, scale_a, scale_b, kernel)
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty(M, N, dtype=out_dtype or (torch.bfloat16 if fp8 else a.dtype), device=a.device)
    if not fp8:
        scale_a = scale_b = c  # never read: SCALED is False
    if interpreting():
        config = config or INTERPRET_CONFIG
        if a.dtype == torch.bfloat16:  # the interpreter's tl.dot misreads BF16 tiles: give it FP32
            a, b = a.float(), b.float()
    fixed = dict(config or {})  # tile shape and launch options, or {} to autotune

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    if kernel == "pointer":
        if fixed:
            launcher = matmul_kernel
            fixed["EVEN_K"] = K % fixed["BLOCK_K"] == 0
        else:
            launcher = _tuned["pointer"][fp8]
        launcher[grid](a, b, c, scale_a, scale_b, M, N, K, *a.stride(), *b.stride(), *c.stride(),
                       SCALED=fp8, **fixed)
        return c
    b_kmajor = b.stride(1) != 1  # B stored column by column: describe B^T, row-major (N, K)
    bm, bn, bk = (fixed["BLOCK_M"], fixed["BLOCK_N"], fixed["BLOCK_K"]) if fixed else (16, 16, 16)
    a_desc = TensorDescriptor.from_tensor(a, [bm, bk])  # autotune resets the tile shapes
    b_desc = (TensorDescriptor.from_tensor(b.T, [bn, bk]) if b_kmajor
              else TensorDescriptor.from_tensor(b, [bk, bn]))
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    launcher = matmul_tma_kernel if fixed else _tuned["tma"][fp8]
    launcher[grid](a_desc, b_desc, c_desc, scale_a, scale_b, M, N, K, SCALED=fp8, B_KMAJOR=b_kmajor,
                   **fixed)
    return c
# [/matmul:launch]


#: Irregular (M, N, K) the kernels are checked on: partial tiles on every edge, K not a multiple
#: of BLOCK_K. The TMA kernel's shapes keep rows on 16-byte boundaries for every type.
CHECK_SHAPES: dict[str, list[tuple[int, int, int]]] = {
    "pointer": [(1, 1, 1), (37, 45, 70), (130, 258, 67), (5, 300, 17)],
    "tma": [(37, 48, 80), (130, 272, 96), (5, 304, 16)]}
#: Largest accepted relative error (Frobenius norm) against float64, by input type: FP32 inputs
#: go through TF32 Tensor Cores on a GPU (10 mantissa bits), 16-bit and FP8 results are rounded
#: to a 16-bit output.
CHECK_TOLERANCE: dict[str, float] = {"float32": 2e-3, "bfloat16": 1e-2, "float16": 2e-3,
                                     "float8_e4m3fn": 1e-2}


def matmul_errors(device: str = "cpu", kernels=("pointer", "tma")) -> list[dict]:
    """Relative error of :func:`matmul` against a float64 product of the same (rounded) inputs, for
    every shape of :data:`CHECK_SHAPES` and every input type; FP8 with scales of 0.5 and 4."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for kernel in kernels:
        for M, N, K in CHECK_SHAPES[kernel]:
            a = torch.randn(M, K, generator=gen).to(device)
            b = torch.randn(K, N, generator=gen).to(device)
            for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float8_e4m3fn):
                x, y, kwargs, factor = a.to(dtype), b.to(dtype), {}, 1.0
                if dtype == torch.float8_e4m3fn:
                    y = b.T.contiguous().to(dtype).T  # column-major, as torch._scaled_mm wants
                    kwargs = {"scale_a": torch.tensor(0.5, device=device),
                              "scale_b": torch.tensor(4.0, device=device)}
                    factor = 2.0
                ref = factor * (x.double() @ y.double())
                out = matmul(x, y, kernel=kernel, **kwargs).double()
                err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                name = str(dtype).removeprefix("torch.")
                rows.append({"kernel": kernel, "shape": [M, N, K], "dtype": name, "rel_err": err,
                             "ok": err <= CHECK_TOLERANCE[name]})
    return rows


def matmul_flops(M: int, N: int, K: int) -> int:
    """Multiplies and adds of ``(M, K) @ (K, N)``: 2MNK."""
    return 2 * M * N * K


# [matmul:measure]
def measure_matmul(sizes=(4096, 8192), device: str = "cuda") -> dict:
    """Time cuBLAS and both Triton kernels on square problems, in BF16 and in FP8 E4M3 (per-tensor
    scales, BF16 output, against ``torch._scaled_mm`` with and without fast accumulation), in one
    run, recording each result's error against an FP32 product of the same inputs. Returns, per size
    and dtype, TFLOP/s, the ratios to the libraries and the config autotune chose."""
    from functools import partial

    from infralens.tools.bench import bench

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: the matmul benchmark needs a GPU")
    rows = []
    for n in sizes:
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, generator=gen)
        b = torch.randn(n, n, device=device, generator=gen)
        one = torch.ones((), device=device)
        a16, b16 = a.bfloat16(), b.bfloat16()
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.T.contiguous().to(torch.float8_e4m3fn).T  # column-major, as torch._scaled_mm wants
        scaled = partial(torch._scaled_mm, a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        # FP8 libraries: cuBLAS with FP32 accumulation, and with Hopper's fast accumulation, which
        # keeps fewer bits while summing over K (what Triton's FP8 tl.dot does on sm_90 by default)
        cases = {"bf16": (a16, b16, {}, {"library": partial(torch.mm, a16, b16)}),
                 "fp8": (a8, b8, {"scale_a": one, "scale_b": one},
                         {"library": scaled, "library_fast": partial(scaled, use_fast_accum=True)})}
        for dtype, (x, y, scales, libraries) in cases.items():
            ref = x.float() @ y.float()  # FP32 product of the same (rounded) inputs
            row = {"n": n, "dtype": dtype, "flops": matmul_flops(n, n, n)}
            for name, fn in [*libraries.items()] + [
                    (kern, partial(matmul, x, y, kernel=kern, **scales)) for kern in ("pointer", "tma")]:
                out = fn()
                err = ((out.float() - ref).norm() / ref.norm()).item()
                t = bench(fn)
                row[name] = {"ms": t["ms"], "ms_q20": t["ms_q20"], "ms_q80": t["ms_q80"],
                             "tflops": row["flops"] / (t["ms"] * 1e-3) / 1e12, "rel_err": err}
                if name in _tuned:
                    best = _tuned[name][dtype == "fp8"].best_config
                    row[name]["config"] = {**best.kwargs, "num_warps": best.num_warps,
                                           "num_stages": best.num_stages}
                    for lib in libraries:
                        row[name][f"vs_{lib}"] = row[name]["tflops"] / row[lib]["tflops"]
            rows.append(row)
    return {"device": torch.cuda.get_device_name(), "rows": rows, "checks": matmul_errors(device)}
# [/matmul:measure]


#: Nsight Compute metrics of :func:`profile_group_order`.
ORDER_NCU_METRICS: tuple[str, ...] = ("dram__bytes_read.sum", "dram__bytes_write.sum",
                                      "lts__t_sector_hit_rate.pct", "gpu__time_duration.sum")


def _profiled_matmul(n: int, config: dict) -> None:
    """One launch of the pointer kernel on (n, n) BF16 operands with a fixed config (run by ncu)."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    matmul(a, b, config=config)
    torch.cuda.synchronize()


# [matmul:profile-order]
def profile_group_order(n: int = 8192, group_ms=(1, GROUP_M), config: tuple[int, ...] | None = None) -> dict:
    """For each GROUP_M: the pointer kernel's DRAM bytes and L2 hit rate under Nsight Compute,
    its time by the book's harness, and :func:`dram_read_model`'s prediction for a wave of as
    many programs as the GPU holds at once (from the compiled kernel's registers and shared
    memory)."""
    import json
    import sys

    from infralens.kernels.persistent_grid import programs_per_sm
    from infralens.tools.bench import bench
    from infralens.tools.ncu import profile

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: profiling needs a GPU")
    bm, bn, bk, stages, warps = config or MATMUL_CONFIGS[0]
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
    b = torch.randn(n, n, device="cuda", generator=gen).bfloat16()
    rows = []
    for group_m in group_ms:
        cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m, "num_warps": warps,
               "num_stages": stages}
        t = bench(lambda cfg=cfg: matmul(a, b, config=cfg))
        code = ("import json, sys; from infralens.kernels.triton_matmul import _profiled_matmul; "
                f"_profiled_matmul({n}, json.loads(sys.argv[1]))")
        res = profile([sys.executable, "-c", code, json.dumps(cfg)], ORDER_NCU_METRICS,
                      kernel_regex="matmul_kernel")
        kernel = next(iter(res["kernels"].values()), {})
        rows.append({"group_m": group_m, "ms": t["ms"], "tflops": matmul_flops(n, n, n) / t["ms"] / 1e9,
                     "ncu": kernel})
    probe = matmul_kernel.warmup(a, b, a, a, a, n, n, n, *a.stride(), *b.stride(), *a.stride(),
                                 BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M, SCALED=False,
                                 EVEN_K=n % bk == 0, num_warps=warps, num_stages=stages, grid=(1,))
    probe._init_handles()
    cc = torch.cuda.get_device_capability()
    per_sm = programs_per_sm(probe.n_regs, probe.metadata.shared, warps, cc)
    wave = per_sm * torch.cuda.get_device_properties(0).multi_processor_count
    for row in rows:
        row["model_read_bytes"] = dram_read_model(n, n, n, bm, bn, row["group_m"], wave, 2)
    return {"device": torch.cuda.get_device_name(), "n": n, "config": [bm, bn, bk, stages, warps],
            "registers": probe.n_regs, "shared_bytes": probe.metadata.shared, "programs_per_sm": per_sm,
            "wave": wave, "operand_bytes": 2 * n * n * 2, "rows": rows, "missing": res.get("missing")}
# [/matmul:profile-order]


#: PTX instructions that say how a matmul kernel moves and multiplies its tiles.
PTX_MARKERS: dict[str, str] = {
    "wgmma.mma_async": "warpgroup MMA (sm_90)", "mma.sync": "warp MMA (sm_80)",
    "cp.async.bulk.tensor": "TMA tile copy", "cp.async.ca": "asynchronous copy (cp.async)",
    "cp.async.cg": "asynchronous copy (cp.async)", "ld.global": "load to registers",
    "mbarrier": "transaction barrier"}


def matmul_resources(kernel: str = "pointer", dtype: str = "bf16", arch: int = 90,
                     config: tuple[int, ...] | None = None) -> dict:
    """Compile one matmul kernel offline for ``sm_<arch>`` with a config of :data:`MATMUL_CONFIGS`
    (the first unless given) and report registers, shared memory and the PTX instructions of
    :data:`PTX_MARKERS` it contains."""
    from infralens.tools.triton_compile import compile_offline

    if kernel not in _tuned:
        raise ValueError(f"kernel {kernel!r}: must be one of {sorted(_tuned)}")
    bm, bn, bk, stages, warps = config or (FP8_CONFIGS if dtype == "fp8e4nv" else MATMUL_CONFIGS)[0]
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M,
              "SCALED": dtype == "fp8e4nv"}
    if kernel == "pointer":
        consts["EVEN_K"] = True
        # A and C row-major; B row-major for 16-bit types and column-major (K-major) for FP8, as the
        # measurements pass them. A stride of 1 is a constant, as Triton's launcher specializes it.
        b_unit = "stride_bk" if consts["SCALED"] else "stride_bn"
        signature = {"a_ptr": f"*{dtype}", "b_ptr": f"*{dtype}", "c_ptr": "*bf16", "scale_a_ptr": "*fp32",
                     "scale_b_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32", "stride_am": "i32",
                     "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "i32",
                     "stride_cm": "i32", "stride_cn": "constexpr"}
        signature[b_unit] = "constexpr"
        consts.update({"stride_ak": 1, b_unit: 1, "stride_cn": 1})
        fn = matmul_kernel
    else:
        consts["B_KMAJOR"] = dtype == "fp8e4nv"
        b_block = [bn, bk] if consts["B_KMAJOR"] else [bk, bn]
        signature = {"a_desc": f"tensordesc<{dtype}[{bm}, {bk}]>", "b_desc": f"tensordesc<{dtype}{b_block}>",
                     "c_desc": f"tensordesc<bf16[{bm}, {bn}]>", "scale_a_ptr": "*fp32",
                     "scale_b_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32"}
        fn = matmul_tma_kernel
    signature.update({name: "constexpr" for name in consts if name not in signature})
    out = compile_offline(fn, signature, consts, num_warps=warps, num_stages=stages, arch=arch)
    counts = {marker: sum(line.lstrip().startswith(marker) or f" {marker}" in line
                          for line in out["ptx"].splitlines() if not line.lstrip().startswith("//"))
              for marker in PTX_MARKERS}
    return {"kernel": kernel, "dtype": dtype, "arch": arch, "config": [bm, bn, bk, stages, warps],
            "registers": out["registers"], "shared_bytes": out["shared_bytes"], "ptx_counts": counts,
            "triton": triton.__version__}


def main(argv=None) -> int:
    from infralens.tools.cli import OneLineParser
    from infralens.tools.triton_compile import compile_command

    parser = OneLineParser(
        prog="python -m infralens.kernels.triton_matmul",
        description="Compile the matmul kernels offline for sm_80 or sm_90; print registers, shared "
                    "memory and the PTX instructions that move and multiply tiles, as JSON lines.")
    parser.add_argument("--arch", type=int, action="append", default=[], choices=(80, 90))
    parser.add_argument("--kernel", action="append", default=[], choices=sorted(_tuned),
                        help="repeatable (default pointer); each for every --arch that has it")
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp8e4nv"))

    def check(args, arch: int) -> None:
        if arch == 80 and (args.dtype == "fp8e4nv" or args.kernel == ["tma"]):
            raise ValueError("sm_80 has no TMA unit and no FP8 Tensor Cores: use --arch 90")

    return compile_command(
        parser, argv, each="arch", wanted="--arch 80|90", check=check,
        compile_all=lambda args: [matmul_resources(kernel, args.dtype, arch)
                                  for kernel in args.kernel or ["pointer"] for arch in args.arch
                                  if not (kernel == "tma" and arch == 80)])  # sm_80 has no TMA


if __name__ == "__main__":
    raise SystemExit(main())
