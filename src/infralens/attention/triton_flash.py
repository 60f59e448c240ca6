"""A FlashAttention forward kernel in Triton: causal and non-causal, head dim 64 and 128 (Lab 07).

One program owns one block of ``BLOCK_M`` queries of one (batch, head). It keeps the block's
running max ``m_i``, running sum ``l_i`` and output accumulator ``acc`` in registers, loops over
the keys and values ``BLOCK_N`` at a time, and writes its output once, normalized. This is the
loop of :func:`infralens.attention.flash_reference.flash_attention_forward`, with
two changes a GPU wants: exponentials in base 2 (the scale folds in log2(e)) and masks only
where needed: for causal attention the key blocks are split into those wholly below the diagonal
(no mask) and those of the diagonal (masked), and a partial last key block (S not a multiple of
the blocks) is split off from the whole ones. The kernel is forward only: it writes O and no
log-sum-exp, so it serves inference, not training.

Under ``TRITON_INTERPRET=1`` (set before ``triton`` is first imported) the kernel runs on CPU
tensors; :func:`flash_attention` then uses small blocks. :func:`measure_attention` times it
against PyTorch's ``scaled_dot_product_attention`` on a GPU.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from infralens.attention.flops import attention_flops
from infralens.attention.reference import naive_attention
from infralens.tools.bench import bench_ms
from infralens.tools.triton_compile import compile_offline, launched_resources

__all__ = ["flash_attention_kernel", "flash_attention", "kernel_config", "GPU_CONFIGS",
           "INTERPRETER_CONFIG", "shared_memory_bytes", "tune_attention", "measure_attention",
           "device_resources", "compile_summary", "check_config", "check_lengths"]

LOG2_E = 1.0 / math.log(2.0)  # exp(x) = 2 ** (x * log2(e))


# [attention:inner]
@triton.jit
def _attend_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_kn, stride_vn, lo, hi,
                   offs_m, offs_n, S, qk_scale,
                   BLOCK_N: tl.constexpr, MASK_CAUSAL: tl.constexpr, MASK_KEYS: tl.constexpr,
                   DOT_PRECISION: tl.constexpr):
    """Fold key/value blocks [lo, hi) into the running (acc, l_i, m_i) of one query block."""
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n  # (BLOCK_N,) key positions
        if MASK_KEYS:  # only when S is not a multiple of the blocks
            k = tl.load(k_ptrs + start_n * stride_kn, mask=cols[:, None] < S, other=0.0)
        else:
            k = tl.load(k_ptrs + start_n * stride_kn)  # (BLOCK_N, D)
        qk = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)  # (BLOCK_M, BLOCK_N) fp32
        if MASK_CAUSAL:
            qk = tl.where(offs_m[:, None] >= cols[None, :], qk, -float("inf"))
        if MASK_KEYS:
            qk = tl.where(cols[None, :] < S, qk, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)  # (BLOCK_M,) in log2 units
        p = tl.math.exp2(qk * qk_scale - m_new[:, None])  # (BLOCK_M, BLOCK_N)
        alpha = tl.math.exp2(m_i - m_new)  # (BLOCK_M,) rescales the old sum and accumulator
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASK_KEYS:
            v = tl.load(v_ptrs + start_n * stride_vn, mask=cols[:, None] < S, other=0.0)
        else:
            v = tl.load(v_ptrs + start_n * stride_vn)  # (BLOCK_N, D)
        acc = tl.dot(p.to(v.dtype), v, acc, input_precision=DOT_PRECISION)  # (BLOCK_M, D)
        m_i = m_new
    return acc, l_i, m_i
# [/attention:inner]


# [attention:kernel]
@triton.jit
def flash_attention_kernel(Q, K, V, O,
                           stride_qb, stride_qh, stride_qs, stride_qd,
                           stride_kb, stride_kh, stride_ks, stride_kd,
                           stride_vb, stride_vh, stride_vs, stride_vd,
                           stride_ob, stride_oh, stride_os, stride_od,
                           H, S, qk_scale,
                           HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                           CAUSAL: tl.constexpr, EVEN_S: tl.constexpr,
                           DOT_PRECISION: tl.constexpr):
    if CAUSAL:  # the last query blocks have the most keys: start them first
        pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    else:
        pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)  # which (batch, head)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,) query positions
    offs_n = tl.arange(0, BLOCK_N)  # (BLOCK_N,) key offsets within a block
    offs_d = tl.arange(0, HEAD_DIM)  # (D,)
    q_ptrs = Q + b * stride_qb + h * stride_qh + offs_m[:, None] * stride_qs + offs_d[None, :] * stride_qd
    k_ptrs = K + b * stride_kb + h * stride_kh + offs_n[:, None] * stride_ks + offs_d[None, :] * stride_kd
    v_ptrs = V + b * stride_vb + h * stride_vh + offs_n[:, None] * stride_vs + offs_d[None, :] * stride_vd
    if EVEN_S:
        q = tl.load(q_ptrs)  # (BLOCK_M, D) read once, kept on chip (sm_90: in shared memory for wgmma)
    else:
        q = tl.load(q_ptrs, mask=offs_m[:, None] < S, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)  # running max (log2 units)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)  # running sum of 2 ** (s - m_i)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)  # running sum of p @ v
    if CAUSAL:
        # Keys [0, start of this block): below the diagonal for every row, no mask needed.
        acc, l_i, m_i = _attend_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                       0, pid_m * BLOCK_M, offs_m, offs_n, S, qk_scale,
                                       BLOCK_N, False, False, DOT_PRECISION)
        # Keys of the diagonal (BLOCK_M // BLOCK_N key blocks): mask those after the query.
        hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
        acc, l_i, m_i = _attend_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                       pid_m * BLOCK_M, hi, offs_m, offs_n, S, qk_scale,
                                       BLOCK_N, True, not EVEN_S, DOT_PRECISION)
    else:
        # Whole key blocks without a mask, then the partial last block (if any) with one.
        n_full = (S // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attend_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                       0, n_full, offs_m, offs_n, S, qk_scale,
                                       BLOCK_N, False, False, DOT_PRECISION)
        if not EVEN_S:
            acc, l_i, m_i = _attend_blocks(acc, l_i, m_i, q, k_ptrs, v_ptrs, stride_ks, stride_vs,
                                           n_full, S, offs_m, offs_n, S, qk_scale,
                                           BLOCK_N, False, True, DOT_PRECISION)
    out = acc / l_i[:, None]  # normalize once
    o_ptrs = O + b * stride_ob + h * stride_oh + offs_m[:, None] * stride_os + offs_d[None, :] * stride_od
    if EVEN_S:
        tl.store(o_ptrs, out.to(O.dtype.element_ty))
    else:
        tl.store(o_ptrs, out.to(O.dtype.element_ty), mask=offs_m[:, None] < S)
# [/attention:kernel]


# [attention:config]
#: (BLOCK_M, BLOCK_N, num_warps, num_stages) per (head dim, causal) on an H100. For D = 128 these
#: are the fastest, or close to the fastest, of :func:`tune_attention`'s search in
#: Lab 07's GPU record; the D = 64 entries are measured there but not searched.
GPU_CONFIGS: dict[tuple[int, bool], tuple[int, int, int, int]] = {
    (64, False): (128, 128, 4, 3),
    (64, True): (128, 64, 8, 3),
    (128, False): (128, 128, 8, 3),
    (128, True): (128, 128, 8, 3),
}
INTERPRETER_CONFIG = (16, 16, 1, 1)  # small blocks: the interpreter runs every lane in NumPy
# [/attention:config]


def shared_memory_bytes(config: tuple[int, int, int, int], head_dim: int, elem_bytes: int = 2) -> int:
    """Shared memory one program of :func:`flash_attention_kernel` takes on sm_90 for ``config``
    (BLOCK_M, BLOCK_N, num_warps, num_stages): the query block once, staged for ``wgmma``, and a
    key block plus a value block for each pipeline stage,
    BLOCK_M * D * e + num_stages * 2 * BLOCK_N * D * e bytes.

    The rule the compiled kernels follow (Lab 07 checks it against :func:`compile_summary`);
    Triton refuses to load a kernel above the per-block limit of the GPU.
    """
    block_m, block_n, _, num_stages = config
    return block_m * head_dim * elem_bytes + num_stages * 2 * block_n * head_dim * elem_bytes


def kernel_config(head_dim: int, causal: bool, device: torch.device) -> tuple[int, int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps, num_stages) for this head dim, mask and device."""
    if device.type != "cuda":
        return INTERPRETER_CONFIG
    return GPU_CONFIGS.get((head_dim, causal), (64, 64, 4, 2))


# [attention:launch]
def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = False,
                    scale: float | None = None, config: tuple[int, int, int, int] | None = None
                    ) -> torch.Tensor:
    """softmax(q k^T * scale) v for q, k, v of shape (B, H, S, D) by :func:`flash_attention_kernel`.

    D must be a power of two from 16 to 256 (64 and 128 have entries in GPU_CONFIGS); any S works.
    """
    return _flash_attention(q, k, v, causal=causal, scale=scale, config=config)[0]


def _flash_attention(q, k, v, *, causal, scale, config):
    """:func:`flash_attention`, also returning what the launch returned (on a GPU: the compiled
    kernel, whose registers and shared memory :func:`device_resources` reads)."""
    if q.ndim != 4 or q.shape != k.shape or q.shape != v.shape:
        raise ValueError(f"q, k, v must share one shape (B, H, S, D): {q.shape}, {k.shape}, {v.shape}")
    B, H, S, D = q.shape
    if D < 16 or D > 256 or D & (D - 1):
        raise ValueError(f"head dim {D}: must be a power of two from 16 to 256")
    if not q.is_cuda and q.dtype == torch.bfloat16:  # seen with triton 3.9's interpreter
        raise ValueError("the Triton interpreter multiplies bfloat16 blocks wrongly: use float32 "
                         "or float16 on the CPU")
    block_m, block_n, num_warps, num_stages = config or kernel_config(D, causal, q.device)
    if block_m % block_n:
        raise ValueError("BLOCK_M must be a multiple of BLOCK_N (the causal split needs it)")
    out = torch.empty_like(q)
    if q.numel() == 0:
        return out, None
    scale = D ** -0.5 if scale is None else scale
    grid = (triton.cdiv(S, block_m), B * H)  # one program per (query block, batch x head)
    compiled = flash_attention_kernel[grid](
        q, k, v, out, *q.stride(), *k.stride(), *v.stride(), *out.stride(),
        H, S, scale * LOG2_E,
        HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, CAUSAL=causal,
        EVEN_S=S % block_m == 0 and S % block_n == 0,
        DOT_PRECISION="ieee" if q.dtype == torch.float32 else "tf32",  # fp32: no TF32 rounding
        num_warps=num_warps, num_stages=num_stages)
    return out, compiled
# [/attention:launch]


def tune_attention(head_dim: int, causal: bool, *, seq_len: int = 8192, tokens: int = 16384,
                   hidden: int = 2048, candidates: list[tuple[int, int, int, int]] | None = None,
                   warmup_ms: int = 10, rep_ms: int = 50) -> list[dict]:
    """Time each candidate (BLOCK_M, BLOCK_N, num_warps, num_stages) at one shape; fastest first."""
    if candidates is None:  # block shapes x warps x pipeline stages
        candidates = [(bm, bn, w, s) for bm, bn in ((64, 64), (128, 64), (128, 128))
                      for w in (4, 8) for s in (2, 3)]
    B, H = tokens // seq_len, hidden // head_dim
    q, k, v = (torch.randn(B, H, seq_len, head_dim, device="cuda", dtype=torch.bfloat16)
               for _ in range(3))
    flops = attention_flops(B, H, seq_len, seq_len, head_dim, causal)
    rows = []
    for cfg in candidates:
        try:
            flash_attention(q, k, v, causal=causal, config=cfg)
            ms = bench_ms(lambda cfg=cfg: flash_attention(q, k, v, causal=causal, config=cfg),
                        warmup_ms=warmup_ms, rep_ms=rep_ms)
            rows.append({"config": list(cfg), "ms": ms, "tflops": flops / (ms * 1e-3) / 1e12})
        except Exception as err:  # out of shared memory or registers: record and go on
            rows.append({"config": list(cfg), "error": type(err).__name__})
    return sorted(rows, key=lambda r: r.get("ms", math.inf))


# [attention:measure]
def measure_attention(seq_lens: list[int], *, head_dim: int = 128, tokens: int = 16384,
                      hidden: int = 2048, dtype: torch.dtype = torch.bfloat16,
                      naive_max_seq: int = 8192, warmup_ms: int = 25, rep_ms: int = 100) -> dict:
    """Forward TFLOP/s of the Triton kernel, SDPA (flash and cuDNN backends) and naive attention.

    Batch B = tokens / S and H = hidden / D heads, so every S moves the same Q, K, V bytes.
    FLOPs: 4 B H S^2 D, halved for causal. Error: max |out - ref| on two heads against a
    float32 reference computed from the same (rounded) inputs; ``rounding_err`` is the error of
    that reference itself rounded to ``dtype``, the least any ``dtype`` output can have.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        def run(q, k, v, causal):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return run

    variants = {
        "triton": lambda q, k, v, causal: flash_attention(q, k, v, causal=causal),
        "sdpa_flash": sdpa(SDPBackend.FLASH_ATTENTION),
        "sdpa_cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "naive": lambda q, k, v, causal: naive_attention(q, k, v, causal=causal),
    }
    H = hidden // head_dim
    out: dict = {"head_dim": head_dim, "tokens": tokens, "heads": H,
                 "dtype": str(dtype).removeprefix("torch."), "device": torch.cuda.get_device_name(),
                 "configs": {str(c): list(kernel_config(head_dim, c, torch.device("cuda")))
                             for c in (False, True)},
                 "runs": {}}
    for causal in (False, True):
        table: dict = {"S": [], "B": [], "tflops": {n: [] for n in variants},
                       "ms": {n: [] for n in variants}, "max_abs_err": {n: [] for n in variants},
                       "rounding_err": []}
        for S in seq_lens:
            B = max(1, tokens // S)
            q, k, v = (torch.randn(B, H, S, head_dim, device="cuda", dtype=dtype) for _ in range(3))
            ref = naive_attention(*(t[:1, :2].float() for t in (q, k, v)), causal=causal)
            flops = attention_flops(B, H, S, S, head_dim, causal)
            table["S"].append(S)
            table["B"].append(B)
            # The floor: the exact (float32) answer itself, rounded to the output type.
            table["rounding_err"].append((ref.to(dtype).float() - ref).abs().max().item())
            for name, fn in variants.items():
                if name == "naive" and S > naive_max_seq:
                    ms, err = None, None
                else:
                    try:
                        got = fn(q, k, v, causal)
                        err = (got[:1, :2].float() - ref).abs().max().item()
                        del got
                        ms = bench_ms(lambda fn=fn, q=q, k=k, v=v, c=causal: fn(q, k, v, c),
                                      warmup_ms=warmup_ms, rep_ms=rep_ms)
                    except RuntimeError as e:  # a backend that cannot run this shape
                        print(f"{name} S={S} causal={causal}: {str(e).splitlines()[0]}")
                        ms, err = None, None
                table["ms"][name].append(ms)
                table["tflops"][name].append(None if ms is None else flops / (ms * 1e-3) / 1e12)
                table["max_abs_err"][name].append(err)
            del q, k, v, ref
            torch.cuda.empty_cache()
        out["runs"]["causal" if causal else "non_causal"] = table
    return out
# [/attention:measure]


def check_lengths(seq_lens: list[int], *, head_dims: tuple[int, ...] = (64, 128), batch: int = 2,
                  heads: int = 3, dtype: torch.dtype = torch.bfloat16, seed: int = 0) -> list[dict]:
    """The kernel on a GPU at lengths that need its masks (S not a multiple of the blocks, or
    smaller than one block), causal and not: one row per (D, causal, S).

    Each row holds the largest absolute error against a float32 reference computed from the same
    rounded inputs (``err``), the same for SDPA's FlashAttention backend (``err_sdpa_flash``),
    and ``floor``, the error of the reference itself rounded to ``dtype``, the least any
    ``dtype`` output can have; ``finite`` says the output holds no NaN or inf.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gen = torch.Generator(device="cuda").manual_seed(seed)
    rows = []
    for D in head_dims:
        for causal in (False, True):
            block_m, block_n = kernel_config(D, causal, torch.device("cuda"))[:2]
            for S in seq_lens:
                q, k, v = (torch.randn(batch, heads, S, D, generator=gen, device="cuda", dtype=dtype)
                           for _ in range(3))
                ref = naive_attention(q.float(), k.float(), v.float(), causal=causal)
                out = flash_attention(q, k, v, causal=causal)
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                rows.append({"head_dim": D, "causal": causal, "S": S, "blocks": [block_m, block_n],
                             "even": S % block_m == 0 and S % block_n == 0,
                             "finite": bool(torch.isfinite(out).all()),
                             "err": (out.float() - ref).abs().max().item(),
                             "err_sdpa_flash": (sdpa.float() - ref).abs().max().item(),
                             "floor": (ref.to(dtype).float() - ref).abs().max().item()})
                del q, k, v, ref, out, sdpa
    return rows


def device_resources(head_dim: int, causal: bool, configs: list[tuple[int, int, int, int]], *,
                     dtype: torch.dtype = torch.bfloat16) -> list[dict]:
    """Registers, spills and shared memory of the kernel as the installed Triton compiled it for
    this GPU, one entry per configuration, read from the compiled kernel after a launch.

    The shapes are those of the measurements (S a multiple of both blocks, several heads), so
    the compiler specializes the kernel the same way. A configuration that cannot launch gets
    ``error``: Triton checks shared memory and threads on the host, before the launch, and
    raises ``OutOfResources``.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available")
    rows = []
    for cfg in configs:
        S = 2 * cfg[0]  # a multiple of BLOCK_M and BLOCK_N (BLOCK_M % BLOCK_N == 0)
        q, k, v = (torch.randn(1, 2, S, head_dim, device="cuda", dtype=dtype) for _ in range(3))
        row: dict = {"config": list(cfg), "causal": causal, "head_dim": head_dim,
                     "triton": triton.__version__}
        try:
            _, compiled = _flash_attention(q, k, v, causal=causal, scale=None, config=cfg)
            torch.cuda.synchronize()
            row.update(launched_resources(compiled))
        except Exception as err:  # out of shared memory or threads: record it and go on
            row["error"] = f"{type(err).__name__}: {' '.join(str(err).split())}"
        rows.append(row)
    return rows


# [attention:compile]
def compile_summary(head_dim: int, causal: bool, config: tuple[int, int, int, int], *,
                    arch: int = 90, unit_stride: bool = True) -> dict:
    """Compile :func:`flash_attention_kernel` for an NVIDIA GPU (``arch`` 90: an H100) without
    one, by :func:`infralens.tools.triton_compile.compile_offline`, and count what matters.

    ``unit_stride`` mimics what the launcher sees for contiguous tensors: the innermost strides
    equal 1, which Triton's JIT turns into compile-time constants.
    """
    check_config(config, head_dim)
    block_m, block_n, num_warps, num_stages = config
    constexprs = {"HEAD_DIM": head_dim, "BLOCK_M": block_m, "BLOCK_N": block_n, "CAUSAL": causal,
                  "EVEN_S": True, "DOT_PRECISION": "tf32"}
    if unit_stride:
        constexprs.update({f"stride_{t}d": 1 for t in "qkvo"})
    signature = {}
    for name in flash_attention_kernel.arg_names:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in ("Q", "K", "V", "O"):
            signature[name] = "*bf16"
        else:  # strides and sizes are i32; the scale is fp32
            signature[name] = "fp32" if name == "qk_scale" else "i32"
    out = compile_offline(flash_attention_kernel, signature, constexprs, num_warps=num_warps,
                          num_stages=num_stages, arch=arch)
    ptx = out["ptx"]
    return {"config": list(config), "unit_stride": unit_stride,
            "shared_bytes": out["shared_bytes"],  # static + pipeline buffers, per program
            "registers": out["registers"],  # per thread
            "wgmma": ptx.count("wgmma.mma_async"),  # Hopper tensor-core instructions
            "cp_async": ptx.count("cp.async.cg"),  # asynchronous global -> shared copies
            "scalar_b16_loads": ptx.count("ld.global.b16"),  # one bf16 element per instruction
            "triton": triton.__version__}
# [/attention:compile]


def check_config(config: tuple[int, ...], head_dim: int) -> None:
    """Raise ``ValueError`` for a (BLOCK_M, BLOCK_N, num_warps, num_stages) that the compiler or the
    GPU refuses, before a compile: blocks powers of two of at least 16 (``tl.dot``), BLOCK_M a
    multiple of BLOCK_N, ``num_warps`` and ``num_stages`` as
    :func:`~infralens.tools.triton_compile.check_options` takes them, and tiles that fit a
    register file: a program keeps its BLOCK_M x BLOCK_N scores and its BLOCK_M x D accumulator in
    fp32 registers, and a tile larger than an SM's registers can only be spilled (the compiler
    takes minutes to do so). Shared memory is not checked here: a config above the per-block
    limit compiles, and Triton refuses it when it loads the kernel (:func:`shared_memory_bytes`).
    """
    from infralens.hardware import CC_LIMITS
    from infralens.tools.triton_compile import check_block, check_options

    if len(config) != 4:
        raise ValueError(f"a config is BLOCK_M,BLOCK_N,WARPS,STAGES: got {len(config)} numbers")
    block_m, block_n, num_warps, num_stages = config
    check_block("BLOCK_M", block_m, least=16)
    check_block("BLOCK_N", block_n, least=16)
    if block_m % block_n:
        raise ValueError(f"BLOCK_M {block_m} must be a multiple of BLOCK_N {block_n} "
                         "(the causal split needs it)")
    check_options(num_warps, num_stages)
    registers = CC_LIMITS[(9, 0)].registers_per_sm.value
    for tile, size in (("BLOCK_M x BLOCK_N scores", block_m * block_n),
                       (f"BLOCK_M x D accumulator (D = {head_dim})", block_m * head_dim)):
        if size > registers:
            raise ValueError(f"config {','.join(map(str, config))}: its {tile} hold {size:,} fp32 "
                             f"values, more than the {registers:,} registers of an SM")


def _config(text: str) -> tuple[int, int, int, int]:
    """argparse type of ``--config``: four integers, BLOCK_M,BLOCK_N,WARPS,STAGES."""
    import argparse

    try:
        config = tuple(int(v) for v in text.split(","))
    except ValueError:
        config = ()
    if len(config) != 4:
        raise argparse.ArgumentTypeError(f"expected BM,BN,WARPS,STAGES (four integers), got {text!r}")
    return config


def _main(argv: list[str] | None = None) -> int:
    from infralens.tools.cli import OneLineParser
    from infralens.tools.triton_compile import compile_command

    parser = OneLineParser(
        prog="python -m infralens.attention.triton_flash",
        description="Compile the FlashAttention kernel for sm_90 offline and summarize its PTX.")
    parser.add_argument("--head-dim", type=int, default=128, choices=(64, 128))
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--config", type=_config, action="append", default=[],
                        metavar="BM,BN,WARPS,STAGES")
    parser.add_argument("--strided", action="store_true", help="do not assume unit inner strides")
    return compile_command(  # compiling fails on a bad config too
        parser, argv, each="config", wanted="--config BM,BN,WARPS,STAGES",
        check=lambda args, cfg: check_config(cfg, args.head_dim),
        compile_all=lambda args: [compile_summary(args.head_dim, args.causal, cfg,
                                                  unit_stride=not args.strided)
                                  for cfg in args.config])


if __name__ == "__main__":
    raise SystemExit(_main())
