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

The kernel gives each program ``BLOCK_N`` columns and a ``1/SPLIT_K`` share of ``K``: it loads a
tile of packed words, unpacks it with shifts and masks into ``BLOCK_K`` rows, applies the group's
scale, and multiplies on the Tensor Cores with ``tl.dot``. With ``SPLIT_K > 1`` the programs of
one column block add their partial sums into an FP32 output with atomics (so the bits of the
result can vary from run to run in the last place). In the CPU build (``TRITON_INTERPRET=1``)
the same kernel runs in Triton's interpreter.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infralens.quant.affine import quantize

__all__ = ["pack_w4", "unpack_w4", "w4a16_matmul", "w4a16_gemv_kernel", "w4a16_kernel",
           "w4a16_reference", "w4_weight_bytes", "bench_w4a16", "profile_w4a16",
           "W4A16_NCU_METRICS", "W4A16_TARGET_SPEEDUP"]


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
def w4a16_gemv_kernel(x_ptr, w_ptr, s_ptr, y_ptr, N, K, stride_wk, stride_sk,
                      GROUP: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      SPLIT_K: tl.constexpr):
    """One row of x (M = 1) on the CUDA cores: no Tensor-Core tile to fill with 15 empty rows.
    The offset of 8 and the group's scale are applied once per tile, not once per weight:
    sum_k x_k (q_k - 8) s = s (sum_k x_k q_k - 8 sum_k x_k)."""
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_ok = offs_n < N
    i8, j8 = tl.arange(0, BLOCK_K // 8), tl.arange(0, 8)
    shifts = j8 * 4
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    k_span = K // SPLIT_K
    for k0 in range(pid_k * k_span, (pid_k + 1) * k_span, BLOCK_K):
        x = tl.load(x_ptr + k0 + i8[:, None] * 8 + j8[None, :]).to(tl.float32)   # (BLOCK_K/8, 8)
        words = tl.load(w_ptr + (k0 // 8 + i8)[:, None] * stride_wk + offs_n[None, :],
                        mask=n_ok[None, :], other=0)                          # (BLOCK_K/8, BLOCK_N)
        q = ((words[:, None, :] >> shifts[None, :, None]) & 0xF).to(tl.float32)
        dot = tl.sum(tl.sum(q * x[:, :, None], axis=1), axis=0)               # (BLOCK_N,)
        s = tl.load(s_ptr + (k0 // GROUP) * stride_sk + offs_n, mask=n_ok, other=0.0)
        acc += s.to(tl.float32) * (dot - 8.0 * tl.sum(tl.sum(x, axis=1), axis=0))
    if SPLIT_K == 1:
        tl.store(y_ptr + offs_n, acc.to(y_ptr.dtype.element_ty), mask=n_ok)
    else:
        tl.atomic_add(y_ptr + offs_n, acc, mask=n_ok)
# [/w4a16:gemv]


def _split_k(n: int, k: int, block_n: int, block_k: int, group: int, target_programs: int) -> int:
    """The smallest power-of-two split of K that gives at least ``target_programs`` programs
    and keeps each share a whole number of ``block_k`` tiles inside groups."""
    split = 1
    while (triton.cdiv(n, block_n) * split < target_programs
           and k % (2 * split * block_k) == 0 and (k // (2 * split)) >= block_k):
        split *= 2
    return split


# [w4a16:launch]
def w4a16_matmul(x: torch.Tensor, packed: torch.Tensor, scales: torch.Tensor, *,
                 block_n: int = 64, block_k: int = 128, split_k: int | None = None,
                 num_warps: int = 4, num_stages: int = 4, gemv: bool = True,
                 launch_info: dict | None = None) -> torch.Tensor:
    """``x`` (M, K) in BF16 or FP16 times the packed INT4 weight: (M, N) in ``x``'s dtype.
    A single row goes to the CUDA-core kernel unless ``gemv=False``. ``launch_info``, if given,
    receives the launch: programs, warps per program, and the compiled kernel's registers and
    spills per thread (on a GPU)."""
    m, k = x.shape
    n = packed.shape[1]
    group = k // scales.shape[0]
    if packed.shape[0] * 8 != k or group % block_k and block_k % group:
        raise ValueError(f"shapes disagree: x {tuple(x.shape)}, packed {tuple(packed.shape)}, "
                         f"scales {tuple(scales.shape)}, block_k={block_k}")
    block_k = min(block_k, group)
    if split_k is None:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
        split_k = _split_k(n, k, block_n, block_k, group, 2 * sms)
    if k % (split_k * block_k):
        raise ValueError(f"K={k} is not a multiple of split_k * block_k = {split_k * block_k}")
    y = torch.empty((m, n), device=x.device, dtype=x.dtype) if split_k == 1 else \
        torch.zeros((m, n), device=x.device, dtype=torch.float32)
    if m == 1 and gemv:
        grid = (triton.cdiv(n, block_n), split_k)
        handle = w4a16_gemv_kernel[grid](x, packed, scales, y, n, k, packed.stride(0),
                                         scales.stride(0), GROUP=group, BLOCK_N=block_n,
                                         BLOCK_K=block_k, SPLIT_K=split_k, num_warps=num_warps,
                                         num_stages=num_stages)
    else:
        block_m = 16                                              # tl.dot's smallest tile
        grid = (triton.cdiv(n, block_n), split_k, triton.cdiv(m, block_m))
        handle = w4a16_kernel[grid](x, packed, scales, y, m, n, k, x.stride(0), packed.stride(0),
                                    scales.stride(0), y.stride(0), GROUP=group, BLOCK_M=block_m,
                                    BLOCK_N=block_n, BLOCK_K=block_k, SPLIT_K=split_k,
                                    num_warps=num_warps, num_stages=num_stages)
    if launch_info is not None:
        launch_info.update(programs=int(torch.tensor(grid).prod()), warps_per_program=num_warps,
                           split_k=split_k)
        if x.is_cuda and hasattr(handle, "n_regs"):
            launch_info.update(registers=handle.n_regs, spills=handle.n_spills)
    return y if split_k == 1 else y.to(x.dtype)
# [/w4a16:launch]


# [w4a16:bench]
def bench_w4a16(shapes=((4096, 14336), (14336, 4096)), batch=(1, 2, 4, 8, 16),
                group_size: int = 128, device: str = "cuda", configs=None) -> dict:
    """Decode-shape benchmark on the GPU: for each (K, N), pick the fastest launch configuration
    at M = 1 from a small grid (``configs``: tuples of block_n, block_k, num_warps, num_stages,
    split_k, gemv) and record its launch (programs, registers); check every result against the
    float64 reference; time it against a BF16 cuBLAS matmul (``x @ W``) for every M, and a device
    copy for the bandwidth ceiling, all through :func:`infralens.tools.bench.bench` (L2 flushed
    before every call)."""
    import functools
    import itertools

    from infralens.tools.bench import bench

    copy_src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    copy_dst = torch.empty_like(copy_src)
    copy_ms = bench(lambda: copy_dst.copy_(copy_src))["ms"]
    out = {"group_size": group_size, "copy_gbps": 2 * copy_src.numel() / copy_ms / 1e6,
           "shapes": []}
    grid = configs or (
        list(itertools.product((64, 128, 256), (64, 128), (4,), (3, 4), (None, 1, 4, 16, 32),
                               (True,)))
        + list(itertools.product((64, 128), (64, 128), (4, 8), (3,), (None, 4), (False,))))
    for k, n in shapes:
        gen = torch.Generator(device=device).manual_seed(0)
        w = torch.randn(k, n, device=device, generator=gen) / k**0.5
        packed, scales = pack_w4(w, group_size)
        w16 = unpack_w4(packed, scales).to(torch.bfloat16)     # the same weights, in BF16
        x1 = torch.randn(1, k, device=device, generator=gen).to(torch.bfloat16)
        tried = []
        for bn, bk, nw, ns, sk, gv in grid:
            try:
                t = bench(functools.partial(w4a16_matmul, x1, packed, scales, block_n=bn,
                                            block_k=bk, split_k=sk, num_warps=nw,
                                            num_stages=ns, gemv=gv))["ms"]
            except (ValueError, RuntimeError, triton.CompilationError):
                continue
            tried.append({"block_n": bn, "block_k": bk, "num_warps": nw, "num_stages": ns,
                          "split_k": sk, "gemv": gv, "ms": t})
        keys = ("block_n", "block_k", "num_warps", "num_stages", "split_k")
        best1 = min(tried, key=lambda r: r["ms"])
        best_dot = min((r for r in tried if not r["gemv"]), key=lambda r: r["ms"], default=best1)
        cfg1 = {key: best1[key] for key in (*keys, "gemv")}
        cfg = {key: best_dot[key] for key in keys}
        launch: dict = {}
        w4a16_matmul(x1, packed, scales, **cfg1, launch_info=launch)
        rows = []
        for m in batch:
            x = torch.randn(m, k, device=device, generator=gen).to(torch.bfloat16)
            use = cfg1 if m == 1 else cfg
            y = w4a16_matmul(x, packed, scales, **use)
            ref = w4a16_reference(x, packed, scales)
            rel = ((y.double() - ref).abs().max() / ref.abs().max()).item()
            ours = bench(functools.partial(w4a16_matmul, x, packed, scales, **use))
            cublas = bench(functools.partial(torch.matmul, x, w16))
            nbytes = w4_weight_bytes(k, n, group_size)
            rows.append({"m": m, "ms": ours["ms"], "cublas_ms": cublas["ms"],
                         "tuned_ms": best1["ms"] if m == 1 else best_dot["ms"],
                         "speedup": cublas["ms"] / ours["ms"], "max_rel_err": rel,
                         "weight_gbps": nbytes / ours["ms"] / 1e6,
                         "cublas_weight_gbps": k * n * 2 / cublas["ms"] / 1e6})
        out["shapes"].append({"k": k, "n": n, "config_m1": cfg1, "launch_m1": launch,
                              "config": cfg, "tried": tried,
                              "rows": rows,
                              "weight_bytes": w4_weight_bytes(k, n, group_size),
                              "bf16_weight_bytes": k * n * 2})
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
    """The process ``profile_w4a16`` runs under Nsight Compute: one warm-up call, one profiled."""
    gen = torch.Generator(device="cuda").manual_seed(0)
    packed, scales = pack_w4(torch.randn(k, n, device="cuda", generator=gen) / k**0.5, group_size)
    x = torch.randn(m, k, device="cuda", generator=gen).to(torch.bfloat16)
    w4a16_matmul(x, packed, scales, **config)
    torch.cuda.synchronize()
    w4a16_matmul(x, packed, scales, **config)
    torch.cuda.synchronize()


# [w4a16:profile]
def profile_w4a16(k: int, n: int, m: int, config: dict, group_size: int = 128) -> dict:
    """Nsight Compute counters of the W4A16 kernel for one shape and launch configuration, with
    the instructions per weight. The process launches it twice; the counters are the first
    launch's (Nsight Compute keeps one launch per kernel name), which runs after compilation."""
    import json
    import sys

    from infralens.tools.ncu import profile

    code = ("import json, sys; from infralens.kernels.w4a16 import _profiled_call; "
            f"_profiled_call({k}, {n}, {m}, json.loads(sys.argv[1]), {group_size})")
    res = profile([sys.executable, "-c", code, json.dumps(config)], W4A16_NCU_METRICS,
                  kernel_regex="w4a16")
    kernels = list(res["kernels"].values())
    last = kernels[-1] if kernels else {}
    inst = last.get("sm__inst_executed.sum")
    return {**res, "kernel": last,
            "warp_instructions_per_weight": None if inst is None else inst / (k * n)}
# [/w4a16:profile]
