"""GEMM epilogue fusion: ``out = gelu(x @ W^T + b) + r`` as one kernel.

A linear layer followed by a bias, a GELU and a residual add is four kernels in eager PyTorch
(:func:`linear_gelu_residual_eager`): the matmul writes its (M, N) result to HBM, and each
elementwise op reads a full (M, N) tensor back and writes another. :func:`linear_gelu_residual`
does the elementwise work in the matmul's epilogue, on each output tile while it is still in
registers: the tile is written once, and the residual is read once. :func:`epilogue_bytes`
counts the HBM bytes both ways; :func:`profile_epilogue` measures them with Nsight Compute.

The kernel's main loop is the TMA-descriptor loop of :mod:`infralens.kernels.triton_matmul`
(:func:`~infralens.kernels.triton_matmul.tma_tile_product`), with the same launch order and tile
shapes; ``W`` is ``nn.Linear``'s (N, K) weight, read K-major. The epilogue computes in FP32 and
rounds once, where eager rounds the matmul's output and every intermediate to the input type.
Under ``TRITON_INTERPRET=1`` the kernel runs on CPU tensors with one small tile shape (BF16
operands widened to FP32 for the dot, as :func:`~infralens.kernels.triton_matmul.matmul` does).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from infralens.kernels.triton_matmul import (
    INTERPRET_CONFIG,
    MATMUL_CONFIGS,
    check_tma_rows,
    tile_of,
    tma_configs,
    tma_tile_product,
)
from infralens.tools.triton_compile import interpreting

__all__ = ["linear_gelu_residual_eager", "epilogue_bytes", "linear_gelu_residual_kernel",
           "linear_gelu_residual", "EPILOGUE_SHAPES", "CHECK_SHAPES", "epilogue_errors",
           "measure_epilogue", "profile_epilogue", "EPILOGUE_TARGET_SPEEDUP", "epilogue_resources",
           "horizontal_linears", "stack_weights", "best_config", "HORIZONTAL_GROUPS", "measure_horizontal"]


# [fused-linear:eager]
def linear_gelu_residual_eager(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                               residual: torch.Tensor) -> torch.Tensor:
    """``gelu(x @ weight^T + bias) + residual`` in PyTorch ops, one kernel per line.

    The comments count elements moved through HBM by the elementwise ops (M rows, N columns);
    the matmul's own operand reads are the same with or without fusion.
    """
    y = torch.mm(x, weight.t())  # (M, N)  cuBLAS: write MN
    y = y + bias  # (M, N)  read MN + N, write MN
    y = F.gelu(y)  # (M, N)  read MN, write MN
    return y + residual  # (M, N)  read 2MN, write MN
    # after the matmul: read 4MN + N, write 3MN; fused, the epilogue reads MN (the residual) + N
# [/fused-linear:eager]


# [fused-linear:bytes]
def epilogue_bytes(M: int, N: int, elem_bytes: int) -> dict[str, int]:
    """HBM bytes of the output side of ``gelu(x W^T + b) + r``, from the counts above: the matmul's
    write and the elementwise ops (``unfused``), or the one write and the residual and bias reads
    of the fused epilogue (``fused``); ``saved`` is the difference, 6MN elements."""
    MN = M * N
    unfused = MN + (4 * MN + N) + 3 * MN  # matmul write; elementwise reads; elementwise writes
    fused = MN + MN + N  # write the output; read the residual and the bias
    return {"unfused": unfused * elem_bytes, "fused": fused * elem_bytes,
            "saved": (unfused - fused) * elem_bytes}
# [/fused-linear:bytes]


# [fused-linear:kernel]
@triton.jit
def gelu_residual_epilogue(acc, off_m, off_n, N, bias_ptr, res_desc, out_desc, WIDTH: tl.constexpr):
    """``gelu(acc + b) + r`` on an FP32 tile of ``WIDTH`` columns from ``off_n``, written once."""
    cols = off_n + tl.arange(0, WIDTH)
    bias = tl.load(bias_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)  # (WIDTH,)
    v = acc + bias[None, :]
    v = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))  # exact GELU: x Phi(x), 1/sqrt(2)
    v += res_desc.load([off_m, off_n]).to(tl.float32)  # read the residual tile once
    out_desc.store([off_m, off_n], v.to(out_desc.dtype))  # round once, write once


@triton.jit
def linear_gelu_residual_kernel(x_desc, w_desc, out_desc, res_desc, bias_ptr, M, N, K,
                                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                GROUP_M: tl.constexpr, SPLIT: tl.constexpr):
    pid_m, pid_n = tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    # The main loop of the plain matmul: W is (N, K), read K-major.
    acc = tma_tile_product(x_desc, w_desc, off_m, off_n, K, BLOCK_M, BLOCK_N, BLOCK_K, True)
    # The epilogue, on the FP32 tile in registers: nothing touches HBM but b, r and out.
    if SPLIT == 1:
        gelu_residual_epilogue(acc, off_m, off_n, N, bias_ptr, res_desc, out_desc, BLOCK_N)
    else:  # two halves of the tile one after the other: half the epilogue's live registers
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        gelu_residual_epilogue(left, off_m, off_n, N, bias_ptr, res_desc, out_desc, BLOCK_N // 2)
        gelu_residual_epilogue(right, off_m, off_n + BLOCK_N // 2, N, bias_ptr, res_desc, out_desc,
                               BLOCK_N // 2)
# [/fused-linear:kernel]


def _epilogue_tile(args: dict) -> list[int]:
    return [args["BLOCK_M"], args["BLOCK_N"] // args["SPLIT"]]


_tuned = triton.autotune(
    tma_configs({"x_desc": lambda a: [a["BLOCK_M"], a["BLOCK_K"]],
                 "w_desc": lambda a: [a["BLOCK_N"], a["BLOCK_K"]],
                 "out_desc": _epilogue_tile, "res_desc": _epilogue_tile},
                extra=[{"SPLIT": 1}, {"SPLIT": 2}]),
    key=["M", "N", "K"])(linear_gelu_residual_kernel)


def _check(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor) -> None:
    """Refuse, in one line, what the kernel cannot do."""
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        raise ValueError(f"x {tuple(x.shape)}, weight {tuple(weight.shape)}: need (M, K) and (N, K)")
    M, N = x.shape[0], weight.shape[0]
    if min(M, N, x.shape[1]) < 1:
        raise ValueError(f"x {tuple(x.shape)}, weight {tuple(weight.shape)}: every dimension must be "
                         "positive")
    if tuple(bias.shape) != (N,) or tuple(residual.shape) != (M, N):
        raise ValueError(f"bias {tuple(bias.shape)}, residual {tuple(residual.shape)}: need ({N},) and "
                         f"({M}, {N})")
    tensors = (x, weight, bias, residual)
    if len({t.dtype for t in tensors}) != 1 or len({t.device for t in tensors}) != 1:
        raise ValueError("x, weight, bias and residual must share one dtype and one device")
    if x.dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"dtype {x.dtype}: must be bfloat16 or float16")
    if x.stride(1) != 1 or weight.stride(1) != 1 or residual.stride(1) != 1 or bias.stride(0) != 1:
        raise ValueError("x, weight, bias and residual must be row-major with unit column stride")
    for name, t in (("x", x), ("weight", weight), ("residual", residual)):
        check_tma_rows(name, t)


# [fused-linear:launch]
def linear_gelu_residual(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                         residual: torch.Tensor, *, config: dict | None = None) -> torch.Tensor:
    """``gelu(x @ weight^T + bias) + residual`` in one kernel; ``weight`` is (N, K) as in
    ``nn.Linear``. ``config`` fixes the tile shape (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M and
    optionally SPLIT, the epilogue's column halves, num_warps, num_stages); without it a GPU
    autotunes over :data:`~infralens.kernels.triton_matmul.MATMUL_CONFIGS`, SPLIT 1 and 2."""
    _check(x, weight, bias, residual)
    M, K = x.shape
    N = weight.shape[0]
    out = torch.empty(M, N, dtype=x.dtype, device=x.device)
    if interpreting():
        config = config or INTERPRET_CONFIG
        x, weight = x.float(), weight.float()  # the interpreter's tl.dot misreads BF16 tiles
    fixed = {"SPLIT": 1, **config} if config else {}
    bm, bn, bk = (fixed["BLOCK_M"], fixed["BLOCK_N"], fixed["BLOCK_K"]) if fixed else (16, 16, 16)
    half = bn // fixed.get("SPLIT", 1)
    descs = (TensorDescriptor.from_tensor(x, [bm, bk]), TensorDescriptor.from_tensor(weight, [bn, bk]),
             TensorDescriptor.from_tensor(out, [bm, half]),
             TensorDescriptor.from_tensor(residual, [bm, half]))

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    launcher = linear_gelu_residual_kernel if fixed else _tuned
    launcher[grid](*descs, bias, M, N, K, **fixed)
    return out
# [/fused-linear:launch]


#: The speed-up over eager PyTorch (cuBLAS and three elementwise kernels) the book sets for the
#: fused kernel.
EPILOGUE_TARGET_SPEEDUP: float = 1.2
#: Irregular (M, K, N) the kernel is checked on: partial tiles on both edges, K not a multiple of
#: BLOCK_K; rows stay on 16-byte boundaries, as a tensor descriptor needs.
CHECK_SHAPES: list[tuple[int, int, int]] = [(37, 80, 48), (130, 96, 272), (5, 16, 304)]
#: (M, K, N) of the benchmark: an MLP's up-projection and an attention output projection of
#: Llama-sized layers, 8,192 tokens or 4,096 tokens per step.
EPILOGUE_SHAPES: list[tuple[int, int, int]] = [(8192, 4096, 4096), (8192, 4096, 14336), (4096, 8192, 8192)]


def epilogue_errors(device: str = "cpu", dtype: torch.dtype = torch.bfloat16, shapes=None) -> list[dict]:
    """Largest absolute error of the fused kernel and of eager PyTorch against a float64
    evaluation of the same (rounded) inputs, for every shape of :data:`CHECK_SHAPES`."""
    rows = []
    gen = torch.Generator().manual_seed(0)
    for M, K, N in shapes or CHECK_SHAPES:
        x = torch.randn(M, K, generator=gen).to(device, dtype)
        w = (torch.randn(N, K, generator=gen) / K**0.5).to(device, dtype)
        b = torch.randn(N, generator=gen).to(device, dtype)
        r = torch.randn(M, N, generator=gen).to(device, dtype)
        ref = F.gelu(x.double() @ w.double().t() + b.double()) + r.double()
        errs = {name: (fn(x, w, b, r).double() - ref).abs().max().item()
                for name, fn in (("fused", linear_gelu_residual), ("eager", linear_gelu_residual_eager))}
        rows.append({"shape": [M, K, N], "dtype": str(dtype).removeprefix("torch."), **errs,
                     "ref_max": ref.abs().max().item()})
    return rows


def _inputs(M: int, K: int, N: int, device: str = "cuda", dtype: torch.dtype = torch.bfloat16):
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(M, K, device=device, generator=gen).to(dtype)
    w = (torch.randn(N, K, device=device, generator=gen) / K**0.5).to(dtype)
    b = torch.randn(N, device=device, generator=gen).to(dtype)
    r = torch.randn(M, N, device=device, generator=gen).to(dtype)
    return x, w, b, r


def best_config(M: int, K: int, N: int) -> dict:
    """The config autotuning picks for the fused kernel at (M, K, N) on this GPU (tile shape,
    GROUP_M, SPLIT, num_warps, num_stages)."""
    linear_gelu_residual(*_inputs(M, K, N))  # autotunes on the first call of a shape
    best = _tuned.best_config  # the config of the last call
    return {**best.kwargs, "num_warps": best.num_warps, "num_stages": best.num_stages}


def _variants(config: dict) -> dict:
    """The ways the benchmark computes ``gelu(x W^T + b) + r`` (and the two matmuls alone), the
    Triton ones with one fixed ``config``."""
    from infralens.kernels.triton_matmul import matmul

    mm_config = {k: v for k, v in config.items() if k != "SPLIT"}

    def triton_unfused(x, w, b, r):  # the same main loop and tiles, elementwise ops after it
        return F.gelu(matmul(x, w.t(), kernel="tma", config=mm_config) + b) + r

    def linear(x, w, b, r):  # nn.Linear's call: addmm, where cuBLASLt can add the bias itself
        return F.gelu(F.linear(x, w, b)) + r

    return {"eager": linear_gelu_residual_eager, "linear": linear, "triton_unfused": triton_unfused,
            "fused": lambda x, w, b, r: linear_gelu_residual(x, w, b, r, config=config),
            "cublas_mm": lambda x, w, b, r: torch.mm(x, w.t()),
            "triton_mm": lambda x, w, b, r: matmul(x, w.t(), kernel="tma", config=mm_config)}


# [fused-linear:measure]
def measure_epilogue(shapes=None, device: str = "cuda") -> dict:
    """Time, in one run and for each (M, K, N) of :data:`EPILOGUE_SHAPES`: eager PyTorch (cuBLAS
    and three elementwise kernels), the same with ``F.linear`` taking the bias, ``torch.compile``
    of the eager function, the Triton matmul followed by the same elementwise ops, the fused
    kernel, and the two matmuls alone; with each variant's errors on 256 rows against float64,
    the CUDA kernels each launches, and the tile shape autotuning picked."""
    from functools import partial

    from infralens.profiling.trace import cuda_kernels
    from infralens.tools.bench import bench

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: the epilogue benchmark needs a GPU")
    out = {"device": torch.cuda.get_device_name(), "dtype": "bfloat16", "shapes": []}
    for M, K, N in shapes or EPILOGUE_SHAPES:
        x, w, b, r = _inputs(M, K, N, device)
        config = best_config(M, K, N)
        fused = linear_gelu_residual(x, w, b, r)
        variants = {**_variants(config), "compiled": torch.compile(linear_gelu_residual_eager)}
        ref = F.gelu(x[:256].double() @ w.double().t() + b.double()) + r[:256].double()
        row = {"shape": [M, K, N], "config": config, "bytes": epilogue_bytes(M, N, x.element_size()),
               "times": {}, "err": {}, "kernels": {}}
        for name, fn in variants.items():
            y = fn(x, w, b, r)
            if name not in ("cublas_mm", "triton_mm"):
                row["err"][name] = (y[:256].double() - ref).abs().max().item()
                row["kernels"][name] = cuda_kernels(fn, x, w, b, r)
            row["times"][name] = bench(partial(fn, x, w, b, r))
        assert torch.equal(fused, variants["fused"](x, w, b, r))
        out["shapes"].append(row)
    out["checks"] = epilogue_errors(device)
    return out
# [/fused-linear:measure]


def _drive(variant: str, M: int, K: int, N: int, config: dict) -> None:
    """One steady-state call of ``variant`` in the profiled region."""
    from infralens.tools.ncu import warm_then_region

    x, w, b, r = _inputs(M, K, N)
    fn = _variants(config)[variant]
    warm_then_region(lambda: fn(x, w, b, r))


# [fused-linear:profile]
def profile_epilogue(M: int, K: int, N: int, config: dict | None = None,
                     variants=("eager", "triton_unfused", "fused")) -> dict:
    """Every kernel launch of one call of each variant under Nsight Compute (DRAM bytes read and
    written, duration), with :func:`epilogue_bytes`'s prediction of the bytes fusion saves. The
    Triton variants share one config: ``config``, or the one autotuning picks here."""
    from infralens.tools.ncu import profile_variants

    config = config or best_config(M, K, N)
    res = profile_variants(f"{__name__}:_drive", variants, (M, K, N, config))
    return {"shape": [M, K, N], "config": config, "model": epilogue_bytes(M, N, 2), **res}
# [/fused-linear:profile]


def epilogue_resources(config: tuple[int, ...] | None = None, arch: int = 90) -> dict:
    """Registers per thread, bytes of local-memory stack (spilled registers) and shared memory per
    program of the plain TMA matmul and of the fused kernel with its epilogue whole (SPLIT 1) and
    in halves (SPLIT 2), compiled offline for ``sm_<arch>`` with one tile shape (the first of
    :data:`MATMUL_CONFIGS` unless given): what the epilogue costs on chip."""
    from infralens.kernels.triton_matmul import GROUP_M, matmul_tma_kernel
    from infralens.tools.triton_compile import compile_stages

    bm, bn, bk, stages, warps = config or MATMUL_CONFIGS[0]
    tiles = {"x_desc": f"tensordesc<bf16[{bm}, {bk}]>", "w_desc": f"tensordesc<bf16[{bn}, {bk}]>"}
    consts = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": GROUP_M}
    plain_consts = {**consts, "SCALED": False, "B_KMAJOR": True}  # the same K-major weight
    plain_sig = {"a_desc": tiles["x_desc"], "b_desc": tiles["w_desc"],
                 "c_desc": f"tensordesc<bf16[{bm}, {bn}]>",
                 "scale_a_ptr": "*fp32", "scale_b_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
                 **{name: "constexpr" for name in plain_consts}}
    kernels = {"matmul": (matmul_tma_kernel, plain_sig, plain_consts)}
    for split in (1, 2):
        out_tile = f"tensordesc<bf16[{bm}, {bn // split}]>"
        sig = {**tiles, "out_desc": out_tile, "res_desc": out_tile, "bias_ptr": "*bf16", "M": "i32",
               "N": "i32", "K": "i32", **{name: "constexpr" for name in (*consts, "SPLIT")}}
        kernels[f"fused_split{split}"] = (linear_gelu_residual_kernel, sig, {**consts, "SPLIT": split})
    out = {"config": [bm, bn, bk, stages, warps], "arch": arch, "triton": triton.__version__}
    for name, (fn, sig, cons) in kernels.items():
        res = compile_stages(fn, sig, cons, num_warps=warps, num_stages=stages, arch=arch)
        out[name] = {key: res[key] for key in ("registers", "stack_bytes", "shared_bytes")}
    return out


# [fused-linear:horizontal]
def stack_weights(weights: list[torch.Tensor]) -> tuple[torch.Tensor, list[int]]:
    """Weights of projections that read the same input, stacked along N once (at load time),
    with each one's N."""
    return torch.cat(weights), [w.shape[0] for w in weights]  # (sum of N_i, K)


def horizontal_linears(x: torch.Tensor, stacked: torch.Tensor, sizes: list[int]) -> list[torch.Tensor]:
    """``[x @ w.T for w in weights]`` as one matmul over :func:`stack_weights`' result: ``x`` is
    read once, one launch instead of several, and the outputs are column slices of one result."""
    return list(torch.mm(x, stacked.t()).split(sizes, dim=1))
# [/fused-linear:horizontal]


#: Projections that share their input in a Llama-3-8B layer: (name, K, [N_i]).
HORIZONTAL_GROUPS: list[tuple[str, int, list[int]]] = [("qkv", 4096, [4096, 1024, 1024]),
                                                       ("gate_up", 4096, [14336, 14336])]


def _separate(x: torch.Tensor, weights: list[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.mm(x, w.t()) for w in weights]


def measure_horizontal(tokens=(16, 4096), groups=None, device: str = "cuda") -> dict:
    """Time the projections of each group of :data:`HORIZONTAL_GROUPS` as separate matmuls and as
    one matmul over stacked weights (stacked before timing, as a model would at load time), for
    each token count, in bf16; outputs checked equal within rounding."""
    from functools import partial

    from infralens.tools.bench import bench

    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available: the projection benchmark needs a GPU")
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    for name, K, ns in groups or HORIZONTAL_GROUPS:
        gen = torch.Generator(device=device).manual_seed(0)
        weights = [(torch.randn(n, K, device=device, generator=gen) / K**0.5).bfloat16() for n in ns]
        stacked, sizes = stack_weights(weights)
        for M in tokens:
            x = torch.randn(M, K, device=device, generator=gen).bfloat16()
            separate = partial(_separate, x, weights)
            fused = partial(horizontal_linears, x, stacked, sizes)
            for a, b in zip(separate(), fused(), strict=True):
                torch.testing.assert_close(a, b, atol=2e-2, rtol=2e-2)
            out["rows"].append({"group": name, "M": M, "K": K, "N": ns,
                                "separate": bench(separate), "fused": bench(fused)})
    return out
