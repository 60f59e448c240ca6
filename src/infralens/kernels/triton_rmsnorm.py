"""RMSNorm in Triton, forward and backward, registered as a PyTorch operator.

``y = x * r * w`` with ``r = 1 / sqrt(mean(x^2) + eps)`` over the last dimension (N) of each row.

* :func:`rmsnorm_fwd_kernel`: one program per row reads the row once, reduces ``sum(x^2)`` in
  FP32, writes ``y`` and keeps ``r`` (one FP32 per row) for the backward.
* :func:`rmsnorm_bwd_kernel`: with ``g = w * dy`` and ``xhat = x * r``,
  ``dx = r * (g - xhat * mean(g * xhat))`` row by row, and ``dw = sum over rows of dy * xhat``.
  ``dw`` is a reduction across rows, so a program handles many rows (a grid of a few programs
  per SM) and keeps its share of ``dw`` in registers; the few partial rows are summed at the end.
* :func:`rms_norm_fwd` and :func:`rms_norm_bwd` are ``torch.library.custom_op`` operators with fake
  (meta) implementations, and the forward has its backward registered, so autograd and
  ``torch.compile(fullgraph=True)`` see :func:`rms_norm` as one opaque operator.

:func:`rms_norm_eager` is the same math in PyTorch ops (the baseline and the reference);
:func:`measure_rmsnorm` times the kernels against it, against ``torch.compile`` of it and against
Liger-Kernel's RMSNorm, with a device copy of the same bytes, in one run.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from infralens.kernels.triton_softmax import persistent_stages, row_num_warps

__all__ = ["rms_norm_eager", "rmsnorm_fwd_kernel", "rmsnorm_bwd_kernel", "column_sum_kernel", "rms_norm_fwd",
           "rms_norm_bwd", "rms_norm", "rmsnorm_errors", "CHECK_SHAPES", "CHECK_TOLERANCE", "bwd_programs",
           "bwd_stages", "BWD_PROGRAMS_PER_SM", "BWD_STAGES", "rmsnorm_bytes", "measure_rmsnorm",
           "eager_rmsnorm_traffic", "profile_rmsnorm_fusion"]

#: Backward grid: programs per SM (each keeps a partial dw in registers).
BWD_PROGRAMS_PER_SM: int = 2
#: Backward row loop: software-pipeline stages (1: no prefetch of the next row).
BWD_STAGES: int = 3


# [rmsnorm:eager]
def rms_norm_eager(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm in PyTorch ops, computed in FP32 (or wider) and returned in x's dtype."""
    wide = torch.promote_types(x.dtype, torch.float32)
    xf = x.to(wide)
    r = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)  # one statistic per row
    return (xf * r * weight.to(wide)).to(x.dtype)
# [/rmsnorm:eager]


# [rmsnorm:fwd-kernel]
@triton.jit
def rmsnorm_fwd_kernel(x_ptr, w_ptr, y_ptr, rstd_ptr, stride_x, stride_y, N, eps,
                       BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # int64: row * stride passes 2**31 on large inputs
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / N + eps)  # masked lanes add 0 to the sum
    tl.store(rstd_ptr + row, rstd)  # 4 bytes per row, for the backward
    tl.store(y_ptr + row * stride_y + cols, x * rstd * w, mask=mask)  # cast to y's dtype
# [/rmsnorm:fwd-kernel]


# [rmsnorm:bwd-kernel]
@triton.jit
def rmsnorm_bwd_kernel(dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_part_ptr, stride_dy, stride_x,
                       stride_dx, M, N, BLOCK_N: tl.constexpr, NUM_STAGES: tl.constexpr):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)  # read once per program
    dw = tl.zeros((BLOCK_N,), dtype=tl.float32)  # this program's share of dw
    # Rows pid, pid + programs, ...; with NUM_STAGES > 1 the loads of the next rows are issued
    # (into shared memory) while this row is reduced.
    for row in tl.range(pid, M, programs, num_stages=NUM_STAGES):
        row = tl.cast(row, tl.int64)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + row * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        g = w * dy
        c = tl.sum(g * xhat, axis=0) / N  # mean(g * xhat): the one reduction of the row
        tl.store(dx_ptr + row * stride_dx + cols, (g - xhat * c) * rstd, mask=mask)
        dw += dy * xhat
    tl.store(dw_part_ptr + pid * N + cols, dw, mask=mask)  # one FP32 row per program
# [/rmsnorm:bwd-kernel]


# [rmsnorm:dw-sum]
@triton.jit
def column_sum_kernel(part_ptr, out_ptr, P, N, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr):
    """out[j] = sum over i of part[i, j] for a (P, N) FP32 array, cast to out's dtype: the
    backward's partial dw rows added up, one block of columns per program."""
    cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros((BLOCK_N,), dtype=tl.float32)
    for start in range(0, P, BLOCK_P):
        rows = start + tl.arange(0, BLOCK_P)
        mask = (rows[:, None] < P) & (cols[None, :] < N)
        acc += tl.sum(tl.load(part_ptr + rows[:, None] * N + cols[None, :], mask=mask, other=0.0), axis=0)
    tl.store(out_ptr + cols, acc, mask=cols < N)
# [/rmsnorm:dw-sum]


def bwd_programs(rows: int, device: torch.device, per_sm: int | None = None) -> int:
    """Programs of the backward grid: ``per_sm`` (default :data:`BWD_PROGRAMS_PER_SM`) per SM, or
    one per row when there are fewer rows."""
    per_sm = per_sm or BWD_PROGRAMS_PER_SM
    sms = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4
    return max(1, min(rows, per_sm * sms))


def bwd_stages(block_n: int, elem_bytes: int, device: torch.device) -> int:
    """Pipeline stages of the backward's row loop: :data:`BWD_STAGES` when the rows of x and dy it
    prefetches fit one program's shared memory (the rule of
    :func:`~infralens.kernels.triton_softmax.persistent_stages`, for both rows), else 1."""
    from infralens.hardware import CC_LIMITS

    cc = torch.cuda.get_device_capability(device) if device.type == "cuda" else (9, 0)
    return BWD_STAGES if persistent_stages(2 * block_n * elem_bytes, CC_LIMITS[cc]) > 1 else 1


def _rows(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x`` as (rows, N) with unit stride along N; refuse what the kernels cannot take."""
    from infralens.tools.triton_compile import MAX_BLOCK_NUMEL

    if weight.dim() != 1 or x.dim() < 1 or x.shape[-1] != weight.shape[0]:
        raise ValueError(f"x {tuple(x.shape)} and weight {tuple(weight.shape)}: weight must be (N,) "
                         "for x (..., N)")
    if not 0 < weight.shape[0] <= MAX_BLOCK_NUMEL:
        raise ValueError(f"N = {weight.shape[0]}: one row must fit one block (1 to {MAX_BLOCK_NUMEL:,})")
    x2 = x.reshape(-1, x.shape[-1])
    return x2 if x2.stride(-1) == 1 else x2.contiguous()


# [rmsnorm:ops]
@torch.library.custom_op("infralens::rms_norm_fwd", mutates_args=())
def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd): the normalized x, and 1 / rms of each row in FP32."""
    x2 = _rows(x, weight)
    M, N = x2.shape
    y = torch.empty_like(x2)
    rstd = torch.empty(M, dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(N)
    rmsnorm_fwd_kernel[(M,)](x2, weight, y, rstd, x2.stride(0), y.stride(0), N, eps, BLOCK_N=block,
                             num_warps=row_num_warps(block, x2.element_size()))
    return y.view(x.shape), rstd.view(x.shape[:-1])


@rms_norm_fwd.register_fake
def _(x, weight, eps):  # shapes and dtypes only: what torch.compile traces with
    return torch.empty_like(x), x.new_empty(x.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("infralens::rms_norm_bwd", mutates_args=())
def rms_norm_bwd(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                 rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dw) from the output gradient and what the forward kept."""
    x2, dy2 = _rows(x, weight), _rows(dy, weight)
    M, N = x2.shape
    dx = torch.empty_like(x2)
    programs = bwd_programs(M, x.device)
    dw_part = torch.empty(programs, N, dtype=torch.float32, device=x.device)
    block = triton.next_power_of_2(N)
    elem = x2.element_size()
    rmsnorm_bwd_kernel[(programs,)](dy2, x2, weight, rstd.reshape(-1), dx, dw_part, dy2.stride(0),
                                    x2.stride(0), dx.stride(0), M, N, BLOCK_N=block,
                                    NUM_STAGES=bwd_stages(block, elem, x.device),
                                    num_warps=row_num_warps(block, elem))
    dw = torch.empty_like(weight)
    column_sum_kernel[(triton.cdiv(N, 256),)](dw_part, dw, programs, N, BLOCK_P=32, BLOCK_N=256)
    return dx.view(x.shape), dw


@rms_norm_bwd.register_fake
def _(dy, x, weight, rstd):
    return torch.empty_like(x), torch.empty_like(weight)


def _setup_context(ctx, inputs, output) -> None:
    x, weight, _eps = inputs
    _y, rstd = output
    ctx.save_for_backward(x, weight, rstd)  # x and 4 bytes a row, not y


def _backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    dx, dw = rms_norm_bwd(dy.contiguous(), x, weight, rstd)
    return dx, dw, None  # nothing for eps


rms_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm of ``x`` (..., N) with ``weight`` (N,) by the Triton kernels, differentiable."""
    return rms_norm_fwd(x, weight, eps)[0]
# [/rmsnorm:ops]


#: Irregular (rows, N) the kernels are checked on: N off every power of two, one row, many rows.
CHECK_SHAPES: list[tuple[int, int]] = [(1, 1), (7, 33), (300, 1000), (1029, 4095), (64, 8193)]
#: Largest accepted max-abs error against float64, by dtype (outputs of order 1).
CHECK_TOLERANCE: dict[str, float] = {"float32": 1e-5, "bfloat16": 6e-2, "float16": 8e-3}


def rmsnorm_errors(device: str = "cpu", shapes=None) -> list[dict]:
    """Max-abs error of :func:`rms_norm`'s y, dx and dw against float64 autograd of
    :func:`rms_norm_eager`, for every shape of :data:`CHECK_SHAPES` and 32- and 16-bit types
    (dw relative to its largest entry, since it sums over rows)."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for M, N in shapes or CHECK_SHAPES:
        x0 = torch.randn(M, N, generator=gen)
        w0 = 1 + 0.1 * torch.randn(N, generator=gen)
        dy0 = torch.randn(M, N, generator=gen)
        for dtype in (torch.float32, torch.bfloat16, torch.float16):
            x, w, dy = (t.to(dtype).to(device) for t in (x0, w0, dy0))
            xr = x.double().cpu().requires_grad_()
            wr = w.double().cpu().requires_grad_()
            ref_dx, ref_dw = torch.autograd.grad(rms_norm_eager(xr, wr), (xr, wr), dy.double().cpu())
            ref_y = rms_norm_eager(xr, wr).detach()
            x.requires_grad_()
            w.requires_grad_()
            y = rms_norm(x, w)
            dx, dw = torch.autograd.grad(y, (x, w), dy)
            errs = {"y": (y.double().cpu() - ref_y).abs().max().item(),
                    "dx": (dx.double().cpu() - ref_dx).abs().max().item(),
                    "dw": ((dw.double().cpu() - ref_dw).abs().max() / ref_dw.abs().max()).item()}
            name = str(dtype).removeprefix("torch.")
            rows.append({"shape": [M, N], "dtype": name, **errs,
                         "ok": max(errs.values()) <= CHECK_TOLERANCE[name]})
    return rows


# [rmsnorm:bytes]
def rmsnorm_bytes(M: int, N: int, elem_bytes: int, programs: int) -> dict[str, int]:
    """HBM bytes the two kernels must move: forward reads x and w and writes y and rstd; backward
    reads dy, x, w and rstd, writes dx and a partial dw per program, which a sum reads back."""
    rows = M * N * elem_bytes  # one (M, N) tensor
    fwd = 2 * rows + N * elem_bytes + 4 * M
    bwd = 3 * rows + N * elem_bytes + 4 * M + 2 * programs * N * 4 + N * elem_bytes
    return {"fwd": fwd, "bwd": bwd, "fwd_bwd": fwd + bwd, "copy_of_x": 2 * rows}
# [/rmsnorm:bytes]


# [rmsnorm:eager-traffic]
def eager_rmsnorm_traffic(M: int, N: int, elem_bytes: int) -> list[dict]:
    """The kernels :func:`rms_norm_eager` launches on an (M, N) input of ``elem_bytes`` per
    element (narrower than FP32), in order, with the HBM bytes each must read and write: every
    intermediate is an (M, N) or (M, 1) FP32 tensor written by one kernel and read by the next."""
    x, f, row, w = M * N * elem_bytes, M * N * 4, M * 4, N * elem_bytes
    return [{"op": "x.to(float32)", "read": x, "write": f},
            {"op": "pow(2)", "read": f, "write": f},
            {"op": "mean(dim=-1)", "read": f, "write": row},
            {"op": "+ eps", "read": row, "write": row},
            {"op": "rsqrt", "read": row, "write": row},
            {"op": "xf * r", "read": f + row, "write": f},
            {"op": "weight.to(float32)", "read": w, "write": N * 4},
            {"op": "* weight", "read": f + N * 4, "write": f},
            {"op": ".to(x.dtype)", "read": f, "write": x}]
# [/rmsnorm:eager-traffic]


def _drive(variant: str, M: int, N: int) -> None:
    """One steady-state forward of ``variant`` in the profiled region."""
    from infralens.tools.ncu import warm_then_region

    fn = {"eager": rms_norm_eager, "fused": lambda x, w: rms_norm_fwd(x, w, 1e-6)[0]}[variant]
    x = torch.randn(M, N, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    warm_then_region(lambda: fn(x, w))


def profile_rmsnorm_fusion(M: int = 16384, N: int = 4096, variants=("eager", "fused")) -> dict:
    """Every kernel launch of one bf16 RMSNorm forward, eager and fused, under Nsight Compute,
    beside :func:`eager_rmsnorm_traffic` and :func:`rmsnorm_bytes`."""
    from infralens.tools.ncu import profile_variants

    res = profile_variants(f"{__name__}:_drive", variants, (M, N))
    return {"shape": [M, N], "model": {"eager": eager_rmsnorm_traffic(M, N, 2),
                                       "fused": rmsnorm_bytes(M, N, 2, 1)["fwd"]}, **res}


# [rmsnorm:measure]
def measure_rmsnorm(hiddens=(4096, 8192), rows: int = 16384, dtype: torch.dtype = torch.bfloat16,
                    eps: float = 1e-6, device: str = "cuda") -> dict:
    """Forward and forward+backward times of the Triton RMSNorm, eager PyTorch, ``torch.compile``
    of the eager norm and Liger-Kernel's RMSNorm (if installed), with ``Tensor.copy_`` of x, in
    one run; each checked first against a float64 reference.

    Times are of CUDA-graph replays (:func:`~infralens.tools.bench.bench_graph`): one call's
    kernels with no host work between them. ``fwd_bwd_launch`` times the same forward+backward
    launched from Python through autograd, where the host's work per call can exceed the GPU's.
    """
    import importlib.metadata
    import importlib.util
    from functools import partial

    from infralens.tools.bench import bench, bench_graph

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: the RMSNorm benchmark needs a GPU")
    variants = {"triton": rms_norm, "eager": rms_norm_eager, "compile": torch.compile(rms_norm_eager)}
    liger_version = None
    if importlib.util.find_spec("liger_kernel") is not None:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        liger_version = importlib.metadata.version("liger-kernel")
        variants["liger"] = LigerRMSNormFunction.apply  # its defaults: 'llama' casting, dx over dy
    out = {"device": torch.cuda.get_device_name(), "rows": rows, "dtype": str(dtype).removeprefix("torch."),
           "liger": liger_version, "bwd_programs_per_sm": BWD_PROGRAMS_PER_SM, "bwd_stages": BWD_STAGES,
           "sms": torch.cuda.get_device_properties(device).multi_processor_count, "sizes": []}
    for n in hiddens:
        gen = torch.Generator(device=device).manual_seed(0)
        x = torch.randn(rows, n, device=device, generator=gen).to(dtype)
        w = (1 + 0.1 * torch.randn(n, device=device, generator=gen)).to(dtype)
        dy = torch.randn(rows, n, device=device, generator=gen).to(dtype)
        xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
        ref_y = rms_norm_eager(xr, wr, eps)
        ref_dx, ref_dw = torch.autograd.grad(ref_y, (xr, wr), dy.double())
        y_copy = torch.empty_like(x)
        size = {"N": n, "bytes": rmsnorm_bytes(rows, n, x.element_size(), bwd_programs(rows, x.device)),
                "copy": bench(partial(y_copy.copy_, x)), "variants": {}}
        for name, fn in variants.items():
            xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
            g = dy.clone()  # Liger overwrites the gradient it is given

            def fwd(fn=fn, x=x, w=w):
                with torch.no_grad():
                    return fn(x, w, eps)

            def fwd_bwd(fn=fn, xg=xg, wg=wg, g=g):
                return torch.autograd.grad(fn(xg, wg, eps), (xg, wg), g)

            y = fwd()
            dx, dw = fwd_bwd()
            errs = {"y": (y.double() - ref_y).abs().max().item(),
                    "dx": (dx.double() - ref_dx).abs().max().item(),
                    "dw_rel": ((dw.double() - ref_dw).norm() / ref_dw.norm()).item()}
            size["variants"][name] = {"fwd": bench_graph(fwd), "fwd_bwd": bench_graph(fwd_bwd),
                                      "fwd_bwd_launch": bench(fwd_bwd), "err": errs}
        out["sizes"].append(size)
    out["checks"] = rmsnorm_errors(device)
    return out
# [/rmsnorm:measure]
