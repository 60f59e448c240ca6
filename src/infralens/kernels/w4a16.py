"""A weight-only INT4 matmul for decoding: 4-bit weights with a scale per group of inputs, 16-bit
activations, FP32 accumulation (W4A16).

At decode batch sizes the matmul ``y = x W`` (x: M x K with M of 1 to 16, W: K x N) reads every
weight once and does two FLOPs with it per row of ``x``: its time is the time to stream ``W``
from HBM. Storing ``W`` in 4 bits instead of 16 cuts that traffic to a quarter plus the scales
(:func:`infralens.quant.effective_bits`), so the ideal speed-up over a BF16 matmul approaches 4x.

Layout (what :func:`pack_w4` produces):

* ``packed`` (K/8, N) int32: eight consecutive rows of ``W`` per word, row ``8i + j`` in bits
  ``4j .. 4j+3`` of ``packed[i]``, stored as ``q + 8`` for a signed code ``q`` in [-8, 7];
* ``scales`` (K/G, N) in the activations' dtype: one per group of ``G`` rows and column.

Two kernels:

* :func:`w4a16_gemv_kernel`, one BF16 row (M = 1) on the CUDA cores, in one launch: each thread
  sums its own columns over a run of K, converting nibbles to FP32 with the exponent trick of
  :func:`_dot8` (about three instructions per weight), and the programs that share columns combine
  their partial sums through a workspace that the last of them reads, writes out and zeroes.
* :func:`w4a16_kernel`, two or more rows on the Tensor Cores: each program takes ``BLOCK_N``
  columns and a ``1/SPLIT_K`` share of ``K``, unpacks a tile of words with shifts and masks into
  ``BLOCK_K`` rows, applies the group's scale, and multiplies with ``tl.dot``; with ``SPLIT_K > 1``
  the programs add their partial sums into an FP32 output with atomics.

Both add FP32 partial sums with atomics, so the last bits of a result can vary from run to run.
In the CPU build (``TRITON_INTERPRET=1``) the same kernels run in Triton's interpreter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infralens.quant.affine import quantize
from infralens.tools.triton_compile import interpreting

__all__ = ["pack_w4", "unpack_w4", "w4a16_matmul", "w4a16_gemv", "w4a16_gemv_kernel",
           "w4a16_kernel", "w4a16_reference", "w4_weight_bytes", "bench_w4a16", "profile_w4a16",
           "gemv_configs", "W4A16_NCU_METRICS", "W4A16_TARGET_SPEEDUP"]


# [w4a16:pack]
def pack_w4(w: torch.Tensor, group_size: int = 128, dtype: torch.dtype = torch.bfloat16):
    """Quantize ``w`` (K, N) to signed 4-bit codes with one symmetric scale per ``group_size`` rows
    and column, and pack eight codes per int32. Returns ``(packed (K/8, N), scales (K/G, N))``."""
    k, n = w.shape
    if k % 8 or k % group_size:
        raise ValueError(f"K={k} must be a multiple of 8 and of group_size={group_size}")
    qt = quantize(w.T, 4, "group", group_size)                    # groups along K, per column
    codes = (qt.q.reshape(n, k).T + 8).to(torch.int64)            # (K, N) in [0, 15]
    shifts = 4 * torch.arange(8, dtype=torch.int64, device=codes.device).reshape(1, 8, 1)
    words = (codes.reshape(k // 8, 8, n) << shifts).sum(dim=1)    # (K/8, N) in [0, 2^32)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    scales = qt.scale.reshape(n, k // group_size).T.to(dtype).contiguous()
    return words.contiguous().to(w.device), scales.to(w.device)
# [/w4a16:pack]


def unpack_w4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """The float32 weight (K, N) that ``packed`` and ``scales`` stand for (for references)."""
    k8, n = packed.shape
    shifts = 4 * torch.arange(8, device=packed.device).reshape(1, 8, 1)
    codes = ((packed.to(torch.int64)[:, None, :] >> shifts) & 0xF).reshape(8 * k8, n) - 8
    group = 8 * k8 // scales.shape[0]
    return codes.float() * scales.float().repeat_interleave(group, dim=0)


def w4_weight_bytes(k: int, n: int, group_size: int, scale_bytes: int = 2) -> int:
    """Bytes the kernel must read for the weights: packed codes plus scales."""
    return k * n // 2 + (k // group_size) * n * scale_bytes


def w4a16_reference(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """float64 x @ unpack(W): what the kernel computes, up to its rounding."""
    return x.double() @ unpack_w4(packed, scales).double()


# [w4a16:kernel]
@triton.jit
def w4a16_kernel(x_ptr, w_ptr, s_ptr, y_ptr, M, N, K, stride_xm, stride_wk, stride_sk, stride_ym,
                 GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BLOCK_K: tl.constexpr, SPLIT_K: tl.constexpr):
    pid_n, pid_k, pid_m = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok, n_ok = offs_m < M, offs_n < N
    shifts = tl.arange(0, 8) * 4                                   # nibble j sits at bits 4j
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    k_span = K // SPLIT_K
    for k0 in range(pid_k * k_span, (pid_k + 1) * k_span, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :], mask=m_ok[:, None],
                    other=0.0)
        rows = k0 // 8 + tl.arange(0, BLOCK_K // 8)
        words = tl.load(w_ptr + rows[:, None] * stride_wk + offs_n[None, :], mask=n_ok[None, :],
                        other=0)
        nib = (words[:, None, :] >> shifts[None, :, None]) & 0xF   # (BLOCK_K/8, 8, BLOCK_N)
        q = tl.reshape(nib, (BLOCK_K, BLOCK_N)) - 8                 # row 8i + j of the tile
        s = tl.load(s_ptr + (k0 // GROUP) * stride_sk + offs_n, mask=n_ok, other=0.0)
        w = (q.to(tl.float32) * s[None, :].to(tl.float32)).to(x.dtype)
        acc += tl.dot(x, w)
    y_ptrs = y_ptr + offs_m[:, None] * stride_ym + offs_n[None, :]
    if SPLIT_K == 1:
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])
    else:
        tl.atomic_add(y_ptrs, acc, mask=m_ok[:, None] & n_ok[None, :])
# [/w4a16:kernel]


# [w4a16:gemv]
@triton.jit
def _dot8(w, p0, p1, p2, p3, MAGIC, SH16):
    """sum_j x_j q_j over the eight nibbles of each word ``w`` (BKW, BN), in FP32, where nibble j
    stores q_j + 8, for x as four int32 pairs of BF16 values (x_2p in the low half). Nibble j of
    the low half, masked in place and OR-ed with the bits of the float 2^23 (exponent 0x4B, so it
    lands in the fraction bits), reads as the float 2^23 + nib * 2^(4j): one FFMA with 2^-4j and the
    offset 2^(23-4j) + 8 turns it into nib - 8 = q_j exactly, one more FFMA accumulates it with x_j.
    The word is shifted once so nibbles 4 to 7 take the same four positions. No integer-to-float
    conversion. MAGIC (0x4B000000) and SH16 (16) arrive as run-time arguments so the compiler keeps
    one immediate per LOP3 instead of refolding them into extra moves. The same trick on FP16
    pairs is how FasterTransformer and Marlin convert 4-bit weights."""
    x0 = (p0 << 16).to(tl.float32, bitcast=True)            # BF16 -> FP32 is a 16-bit shift
    x1 = (p0 & -65536).to(tl.float32, bitcast=True)
    x2 = (p1 << 16).to(tl.float32, bitcast=True)
    x3 = (p1 & -65536).to(tl.float32, bitcast=True)
    x4 = (p2 << 16).to(tl.float32, bitcast=True)
    x5 = (p2 & -65536).to(tl.float32, bitcast=True)
    x6 = (p3 << 16).to(tl.float32, bitcast=True)
    x7 = (p3 & -65536).to(tl.float32, bitcast=True)
    acc = (((w & 0xF) | MAGIC).to(tl.float32, bitcast=True) - 8388616.0) * x0
    acc += (((w & 0xF0) | MAGIC).to(tl.float32, bitcast=True) * 0.0625 - 524296.0) * x1
    acc += (((w & 0xF00) | MAGIC).to(tl.float32, bitcast=True) * 0.00390625 - 32776.0) * x2
    acc += (((w & 0xF000) | MAGIC).to(tl.float32, bitcast=True) * 0.000244140625 - 2056.0) * x3
    w = w >> SH16                                            # nibbles 4..7 into bits 0..15
    acc += (((w & 0xF) | MAGIC).to(tl.float32, bitcast=True) - 8388616.0) * x4
    acc += (((w & 0xF0) | MAGIC).to(tl.float32, bitcast=True) * 0.0625 - 524296.0) * x5
    acc += (((w & 0xF00) | MAGIC).to(tl.float32, bitcast=True) * 0.00390625 - 32776.0) * x6
    acc += (((w & 0xF000) | MAGIC).to(tl.float32, bitcast=True) * 0.000244140625 - 2056.0) * x7
    return acc


@triton.jit(do_not_specialize=["n_tiles", "tiles_per_program", "MAGIC", "SH16"])
def w4a16_gemv_kernel(x_ptr, w_ptr, s_ptr, y_ptr, ws_ptr, count_ptr, N, stride_wk, stride_sk,
                      n_tiles, tiles_per_program, MAGIC, SH16, GROUP: tl.constexpr,
                      BN: tl.constexpr, BKW: tl.constexpr, EVEN_N: tl.constexpr,
                      SINGLE: tl.constexpr, POLICY: tl.constexpr):
    """One row of x (M = 1, BF16) on the CUDA cores, in one launch. Program (n, k) owns BN columns
    and a run of K tiles of BKW packed rows (8 BKW rows of W); every thread keeps its own (BKW, BN)
    slice of the sums in registers, with no reduction across threads until the end. The programs of
    a column block then add their partial sums into an FP32 workspace, and the last one to arrive
    (a counter, acquire-release) writes the BF16 result and leaves workspace and counter zeroed for
    the next call: no zero-fill before, no cast after. Caveats: the order of the FP32 adds varies,
    so a result can differ in its last bit from run to run; the workspace is shared by every call
    with the same (device, N, BN), so calls must not overlap (two streams, concurrent graph
    replays); a launch that dies midway leaves it dirty."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    offs_n = pid_n * BN + tl.arange(0, BN)
    n_ok = offs_n < N
    rows = tl.arange(0, BKW)
    acc = tl.zeros((BKW, BN), dtype=tl.float32)
    t0 = pid_k * tiles_per_program
    for t in range(t0, tl.minimum(t0 + tiles_per_program, n_tiles)):
        w_ptrs = w_ptr + (t * BKW + rows)[:, None] * stride_wk + offs_n[None, :]
        s_ptrs = s_ptr + (t * BKW * 8 // GROUP) * stride_sk + offs_n
        if EVEN_N:                                 # POLICY "evict_first": streamed once, leave L2
            w = tl.load(w_ptrs, eviction_policy=POLICY)
            s = tl.load(s_ptrs, eviction_policy=POLICY)
        else:
            w = tl.load(w_ptrs, mask=n_ok[None, :], other=0, eviction_policy=POLICY)
            s = tl.load(s_ptrs, mask=n_ok, other=0.0, eviction_policy=POLICY)
        q0 = tl.load(x_ptr + (t * BKW + rows) * 2)               # 8 BF16 x values per packed row,
        q1 = tl.load(x_ptr + (t * BKW + rows) * 2 + 1)           # read as two int64
        p0, p1 = q0.to(tl.int32)[:, None], (q0 >> 32).to(tl.int32)[:, None]
        p2, p3 = q1.to(tl.int32)[:, None], (q1 >> 32).to(tl.int32)[:, None]
        acc += _dot8(w, p0, p1, p2, p3, MAGIC, SH16) * s.to(tl.float32)[None, :]
    part = tl.sum(acc, axis=0)
    if SINGLE:
        tl.store(y_ptr + offs_n, part.to(y_ptr.dtype.element_ty), mask=n_ok)
    else:
        tl.atomic_add(ws_ptr + offs_n, part, mask=n_ok, sem="relaxed")
        tl.debug_barrier()      # all threads' adds precede the count, which is released GPU-wide
        arrived = tl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel")
        if arrived == tl.num_programs(1) - 1:     # the last program of this column block
            total = tl.atomic_add(ws_ptr + offs_n, tl.zeros((BN,), dtype=tl.float32), mask=n_ok,
                                  sem="acq_rel")  # read the sums where the atomics left them (L2)
            tl.store(y_ptr + offs_n, total.to(y_ptr.dtype.element_ty), mask=n_ok)
            tl.store(ws_ptr + offs_n, tl.zeros((BN,), dtype=tl.float32), mask=n_ok)
            tl.store(count_ptr + pid_n, 0)
# [/w4a16:gemv]


def _split_k(n: int, k: int, block_n: int, block_k: int, group: int, target_programs: int) -> int:
    """The smallest power-of-two split of K that gives at least ``target_programs`` programs
    and keeps each share a whole number of ``block_k`` tiles inside groups."""
    split = 1
    while (triton.cdiv(n, block_n) * split < target_programs
           and k % (2 * split * block_k) == 0 and (k // (2 * split)) >= block_k):
        split *= 2
    return split


#: The GEMV's tiles worth timing (columns per program, packed rows per tile, warps), from a sweep
#: on an H100, and the program counts (two to seven per SM there) each is tried at.
GEMV_TILES = ((512, 4, 4), (1024, 2, 4), (1024, 4, 8), (512, 8, 4), (256, 16, 4))
GEMV_PROGRAMS = (264, 396, 528, 728, 896)
_MAGIC = 0x4B000000                       # the exponent bits of 2^23 (see _dot8)
_WORKSPACES: dict = {}                    # (device, N, BN) -> FP32 sums and counters, kept zeroed
_LAUNCHERS: dict = {}                     # a compiled kernel and its arguments, per call signature
_TUNED: dict = {}                         # (device, K, N) -> the configuration timed fastest
_FAST = {"enabled": not interpreting(), "error": None}


def gemv_configs(k: int, n: int) -> list[dict]:
    """Every configuration the GEMV's tuning times for a (K, N): each tile at each program count,
    with and without the evict-first hint."""
    out = []
    for bn, bkw, warps in GEMV_TILES:
        for programs in GEMV_PROGRAMS:
            for evict in (True, False):
                out.append({"bn": bn, "bkw": bkw, "num_warps": warps, "evict": evict,
                            "split": max(1, round(programs / triton.cdiv(n, bn)))})
    return out


def _gemv_grid(k: int, n: int, bn: int, bkw: int, split: int):
    """(grid, tiles, tiles per program) for a requested split of K into runs of whole tiles."""
    n_tiles = k // (8 * bkw)
    per_program = triton.cdiv(n_tiles, max(1, split))
    return (triton.cdiv(n, bn), triton.cdiv(n_tiles, per_program)), n_tiles, per_program


def _workspace(device: torch.device, n: int, bn: int):
    key = (str(device), n, bn)
    if key not in _WORKSPACES:
        _WORKSPACES[key] = (torch.zeros(n, device=device, dtype=torch.float32),
                            torch.zeros(triton.cdiv(n, bn), device=device, dtype=torch.int32))
    return _WORKSPACES[key]


def _aligned(*tensors) -> bool:
    return all(t.data_ptr() % 16 == 0 for t in tensors)


def _gemv(x, packed, scales, y, *, bn, bkw, split, evict, num_warps, launch_info=None):
    """One launch of :func:`w4a16_gemv_kernel` into ``y`` (1, N) BF16. The first call of a
    signature (shapes, strides, dtypes, configuration) goes through Triton's JIT and keeps the
    compiled kernel; later ones call its launcher directly, which skips the JIT's per-call argument
    binding and cache lookup on the host (and its launch hooks, so hook-based profilers do not see
    these launches). A Triton whose launcher differs falls back to the JIT path for good;
    ``_FAST`` says which path ran."""
    k, n = x.shape[-1], packed.shape[1]
    key = (str(x.device), k, n, packed.stride(0), scales.shape[0], scales.stride(0), x.dtype,
           packed.dtype, scales.dtype, y.dtype, bn, bkw, split, evict, num_warps)
    cached = _LAUNCHERS.get(key) if _FAST["enabled"] and launch_info is None else None
    if cached is not None and _aligned(x, packed, scales, y):
        compiled, grid, tail, stream = cached
        try:
            compiled.run(grid[0], grid[1], 1, stream(x.device.index), compiled.function,
                         compiled.packed_metadata, None, None, None, x.view(torch.int64),
                         packed, scales, y, *tail)
            return y
        except Exception as err:  # noqa: BLE001 (another Triton's launcher: use the JIT from now)
            _FAST.update(enabled=False, error=repr(err))
    grid, n_tiles, per_program = _gemv_grid(k, n, bn, bkw, split)
    ws, count = _workspace(x.device, n, bn)
    tail = (ws, count, n, packed.stride(0), scales.stride(0), n_tiles, per_program, _MAGIC, 16,
            k // scales.shape[0], bn, bkw, n % bn == 0, grid[1] == 1,
            "evict_first" if evict else "")
    compiled = w4a16_gemv_kernel[grid](x.view(torch.int64), packed, scales, y, *tail,
                                       num_warps=num_warps, num_stages=1)
    if _FAST["enabled"] and hasattr(compiled, "packed_metadata") and _aligned(x, packed, scales, y):
        from triton.runtime import driver
        _LAUNCHERS[key] = (compiled, grid, tail, driver.active.get_current_stream)
    if launch_info is not None:
        launch_info.update(programs=grid[0] * grid[1], warps_per_program=num_warps,
                           split_k=grid[1])
        if hasattr(compiled, "n_regs"):
            launch_info.update(registers=compiled.n_regs, spills=compiled.n_spills)
    return y


# [w4a16:launch]
def w4a16_gemv(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, config: dict | None = None,
               *, launch_info: dict | None = None) -> torch.Tensor:
    """``x`` (1, K) in BF16 times the packed INT4 weight: (1, N) in BF16, in one launch. ``config``
    (a :func:`gemv_configs` entry) fixes the launch; without one, the first call for a (device,
    K, N) times every candidate (L2 flushed) and later calls reuse the fastest."""
    k, n = x.shape[-1], packed.shape[1]
    group = k // scales.shape[0]
    if x.numel() != k or packed.shape[0] * 8 != k or scales.shape[1] != n:
        raise ValueError(f"shapes disagree: x {tuple(x.shape)}, packed {tuple(packed.shape)}, "
                         f"scales {tuple(scales.shape)}")
    x = x.to(torch.bfloat16).contiguous()
    if not _aligned(x):
        x = x.clone()
    if config is None:
        config = _TUNED.get((str(x.device), k, n))
        if config is None:
            config = _TUNED[(str(x.device), k, n)] = _tune_gemv(x, packed, scales)
    if group % (8 * config["bkw"]):
        raise ValueError(f"a tile of {8 * config['bkw']} rows must not cross a group of {group}")
    y = torch.empty((1, n), device=x.device, dtype=torch.bfloat16)
    return _gemv(x.reshape(1, k), packed, scales, y, **config, launch_info=launch_info)


def _tune_gemv(x, packed, scales) -> dict:
    """The fastest of :func:`gemv_configs` for these operands (the first one in the interpreter)."""
    group = x.shape[-1] // scales.shape[0]
    configs = [c for c in gemv_configs(x.shape[-1], packed.shape[1]) if group % (8 * c["bkw"]) == 0]
    if not x.is_cuda:
        return configs[0]
    from infralens.tools.bench import bench

    timed = []
    for cfg in configs:
        y = torch.empty((1, packed.shape[1]), device=x.device, dtype=torch.bfloat16)
        timed.append((bench(lambda cfg=cfg, y=y: _gemv(x, packed, scales, y, **cfg),
                            rep_ms=20, warmup_ms=5)["ms"], cfg))
    return min(timed, key=lambda t: t[0])[1]


def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, *,
                 config: dict | None = None, gemv: bool = True,
                 launch_info: dict | None = None) -> torch.Tensor:
    """``x`` (M, K) in BF16 or FP16 times the packed INT4 weight: (M, N) in ``x``'s dtype. A single
    BF16 row goes to the CUDA-core GEMV (:func:`w4a16_gemv`, ``config`` one of
    :func:`gemv_configs`) unless ``gemv=False``; anything else to the Tensor-Core kernel, with
    ``config`` keys ``block_n``, ``block_k``, ``split_k``, ``num_warps``, ``num_stages``.
    ``launch_info``, if given, receives the launch: programs, warps per program, and the compiled
    kernel's registers and spills per thread (on a GPU)."""
    m, k = x.shape
    if m == 1 and gemv and x.dtype == torch.bfloat16:
        return w4a16_gemv(x, packed, scales, config, launch_info=launch_info)
    cfg = {"block_n": 64, "block_k": 128, "split_k": None, "num_warps": 4, "num_stages": 4,
           **(config or {})}
    n = packed.shape[1]
    group = k // scales.shape[0]
    block_k = cfg["block_k"]
    if packed.shape[0] * 8 != k or group % block_k and block_k % group:
        raise ValueError(f"shapes disagree: x {tuple(x.shape)}, packed {tuple(packed.shape)}, "
                         f"scales {tuple(scales.shape)}, block_k={block_k}")
    block_k = min(block_k, group)
    split_k = cfg["split_k"]
    if split_k is None:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
        split_k = _split_k(n, k, cfg["block_n"], block_k, group, 2 * sms)
    if k % (split_k * block_k):
        raise ValueError(f"K={k} is not a multiple of split_k * block_k = {split_k * block_k}")
    y = torch.empty((m, n), device=x.device, dtype=x.dtype) if split_k == 1 else \
        torch.zeros((m, n), device=x.device, dtype=torch.float32)
    block_m = 16                                              # tl.dot's smallest tile
    grid = (triton.cdiv(n, cfg["block_n"]), split_k, triton.cdiv(m, block_m))
    handle = w4a16_kernel[grid](x, packed, scales, y, m, n, k, x.stride(0), packed.stride(0),
                                scales.stride(0), y.stride(0), GROUP=group, BLOCK_M=block_m,
                                BLOCK_N=cfg["block_n"], BLOCK_K=block_k, SPLIT_K=split_k,
                                num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    if launch_info is not None:
        launch_info.update(programs=int(torch.tensor(grid).prod()),
                           warps_per_program=cfg["num_warps"], split_k=split_k)
        if x.is_cuda and hasattr(handle, "n_regs"):
            launch_info.update(registers=handle.n_regs, spills=handle.n_spills)
    return y if split_k == 1 else y.to(x.dtype)
# [/w4a16:launch]


# [w4a16:bench]
def bench_w4a16(shapes=((4096, 14336), (14336, 4096)), batch=(1, 2, 4, 8, 16),
                group_size: int = 128, device: str = "cuda", dot_configs=None) -> dict:
    """Decode-shape benchmark on the GPU. For each (K, N): time every GEMV configuration at M = 1
    (:func:`gemv_configs`) and a small grid of Tensor-Core configurations at M = 2 (``dot_configs``:
    tuples of block_n, block_k, num_warps, num_stages, split_k), keep the fastest of each, record
    its launch (programs, registers); check every result against the float64 reference; time it
    against a BF16 cuBLAS matmul (``x @ W``) for every M, and a device copy for the bandwidth
    ceiling, and library reductions over the packed words (the time one launch takes to read the
    same bytes),
    through :func:`infralens.tools.bench.bench` (L2 flushed before every call). At M = 1 both are
    timed a second time with the L2 flushed by reading instead of zeroing (``flush="read"``), which
    leaves no dirty lines for the timed call to write back."""
    import functools
    import itertools

    from infralens.tools.bench import bench

    copy_src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    copy_dst = torch.empty_like(copy_src)
    copy_ms = bench(lambda: copy_dst.copy_(copy_src))["ms"]
    out = {"group_size": group_size, "copy_gbps": 2 * copy_src.numel() / copy_ms / 1e6,
           "shapes": []}
    dot_grid = dot_configs or list(itertools.product((64, 128), (64, 128), (4, 8), (3,), (None, 4)))
    dot_keys = ("block_n", "block_k", "num_warps", "num_stages", "split_k")
    for k, n in shapes:
        gen = torch.Generator(device=device).manual_seed(0)
        w = torch.randn(k, n, device=device, generator=gen) / k**0.5
        packed, scales = pack_w4(w, group_size)
        w16 = unpack_w4(packed, scales).to(torch.bfloat16)     # the same weights, in BF16
        x1 = torch.randn(1, k, device=device, generator=gen).to(torch.bfloat16)
        x2 = torch.randn(2, k, device=device, generator=gen).to(torch.bfloat16)
        tried, tried_dot = [], []
        for cfg in gemv_configs(k, n):
            if group_size % (8 * cfg["bkw"]) == 0:
                t = bench(functools.partial(w4a16_gemv, x1, packed, scales, cfg))["ms"]
                tried.append({**cfg, "ms": t})
        for values in dot_grid:
            cfg = dict(zip(dot_keys, values, strict=True))
            try:
                t = bench(functools.partial(w4a16_matmul, x2, packed, scales, config=cfg))["ms"]
            except (ValueError, RuntimeError, triton.CompilationError):
                continue
            tried_dot.append({**cfg, "ms": t})
        best1 = min(tried, key=lambda r: r["ms"])
        best_dot = min(tried_dot, key=lambda r: r["ms"])
        cfg1 = {key: best1[key] for key in ("bn", "bkw", "num_warps", "evict", "split")}
        cfg = {key: best_dot[key] for key in dot_keys}
        launch: dict = {}
        w4a16_gemv(x1, packed, scales, cfg1, launch_info=launch)
        rows = []
        for m in batch:
            x = x1 if m == 1 else torch.randn(m, k, device=device, generator=gen).to(torch.bfloat16)
            call = functools.partial(w4a16_matmul, x, packed, scales, config=cfg1 if m == 1 else cfg)
            y = call()
            ref = w4a16_reference(x, packed, scales)
            rel = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            ours = bench(call)
            cublas = bench(functools.partial(torch.matmul, x, w16))
            nbytes = w4_weight_bytes(k, n, group_size)
            row = {"m": m, "ms": ours["ms"], "ms_q20": ours["ms_q20"], "ms_q80": ours["ms_q80"],
                   "cublas_ms": cublas["ms"], "tuned_ms": best1["ms"] if m == 1 else best_dot["ms"],
                   "speedup": cublas["ms"] / ours["ms"], "max_rel_err": rel,
                   "weight_gbps": nbytes / ours["ms"] / 1e6,
                   "cublas_weight_gbps": k * n * 2 / cublas["ms"] / 1e6}
            if m == 1:
                read = bench(call, flush="read")["ms"]
                cublas_read = bench(functools.partial(torch.matmul, x, w16), flush="read")["ms"]
                row.update(ms_read=read, cublas_ms_read=cublas_read, speedup_read=cublas_read / read)
            rows.append(row)
        # the floor of one launch that only reads the same bytes: library reductions over the
        # packed words (the FP32 view's sum is meaningless as a number; only its time is used)
        floors = {"amax": bench(functools.partial(torch.amax, packed))["ms"],
                  "sum_f32": bench(functools.partial(torch.sum, packed.view(torch.float32)))["ms"]}
        out["shapes"].append({"k": k, "n": n, "config_m1": cfg1, "launch_m1": launch,
                              "read_floor_ms": min(floors.values()), "read_floors": floors,
                              "config": cfg, "tried": tried, "tried_dot": tried_dot, "rows": rows,
                              "weight_bytes": w4_weight_bytes(k, n, group_size),
                              "bf16_weight_bytes": k * n * 2})
    out["fast_launch"] = dict(_FAST)          # whether the timed GEMV calls used the cached launcher
    return out
# [/w4a16:bench]


#: The speed-up over cuBLAS BF16 at M = 1 the book sets for this kernel (the ideal, the byte
#: ratio, is about 3.9x at groups of 128; published kernels come close to it).
W4A16_TARGET_SPEEDUP = 2.5

#: Counters that decide what bounds the kernel: DRAM traffic and throughput, how busy the
#: schedulers' issue slots are, and how many instructions each weight costs.
W4A16_NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
)


def _profiled_call(k: int, n: int, m: int, config: dict, group_size: int = 128) -> None:
    """The process ``profile_w4a16`` runs under Nsight Compute: a first call, then the one whose
    counters the page reads."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    packed, scales = pack_w4(torch.randn(k, n, device="cuda", generator=gen) / k**0.5, group_size)
    x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    w4a16_matmul(x, packed, scales, config=config)
    torch.cuda.synchronize()
    w4a16_matmul(x, packed, scales, config=config)
    torch.cuda.synchronize()


# [w4a16:profile]
def profile_w4a16(k: int, n: int, m: int, config: dict, group_size: int = 128) -> dict:
    """Nsight Compute counters of the W4A16 kernel for one shape and launch configuration, with
    the instructions per weight. The process launches it twice; ``kernel`` holds the counters of
    the last launch (the steady state, after the first call's compilation and set-up), and
    ``launches`` every launch's."""
    import json
    import sys

    from infralens.tools.ncu import profile

    code = ("import json, sys; from infralens.kernels.w4a16 import _profiled_call; "
            f"_profiled_call({k}, {n}, {m}, json.loads(sys.argv[1]), {group_size})")
    res = profile([sys.executable, "-c", code, json.dumps(config)], W4A16_NCU_METRICS,
                  kernel_regex="w4a16")
    launches = res.get("launches") or []
    last = launches[-1] if launches else {}
    inst = last.get("sm__inst_executed.sum")
    return {**res, "kernel": last,
            "warp_instructions_per_weight": None if inst is None else inst / (k * n)}
# [/w4a16:profile]
