"""How far a library matmul lands from the exact product, per input format and accumulation mode.

:func:`matmul_error_sweep` multiplies random non-negative matrices (so the K products of each
output add coherently, the hard case for an accumulator) for a range of K, in each precision
mode a PyTorch user can select, and measures every output against a float64 product of the
same rounded inputs. Errors that grow with K come from the accumulation; a floor that does not
move with K is the rounding of the output to its format.

Modes (each is skipped, with the reason kept, where the device or the build lacks it):

``fp32``        FP32 inputs, FP32 math (``torch.set_float32_matmul_precision("highest")``)
``tf32``        FP32 inputs rounded to TF32 by the Tensor Cores (precision ``"high"``)
``bf16``        BF16 inputs and output, reduced-precision reductions disallowed
``bf16_rpr``    the same with ``allow_bf16_reduced_precision_reduction = True``
``bf16_f32out`` BF16 inputs, FP32 output (``torch.mm(..., out_dtype=torch.float32)``)
``fp16``/``fp16_rpr``/``fp16_f32out`` the same three for FP16
``fp8``/``fp8_fast`` E4M3 inputs, FP32 output, ``torch._scaled_mm`` with ``use_fast_accum``
                False/True
"""

from __future__ import annotations

import contextlib

import torch

__all__ = ["MODES", "matmul_error_sweep"]

MODES = ("fp32", "tf32", "bf16", "bf16_rpr", "bf16_f32out", "fp16", "fp16_rpr", "fp16_f32out",
         "fp8", "fp8_fast")


@contextlib.contextmanager
def _settings(fp32_precision: str = "highest", bf16_rpr: bool | None = None,
              fp16_rpr: bool | None = None):
    m = torch.backends.cuda.matmul
    saved = (torch.get_float32_matmul_precision(), m.allow_bf16_reduced_precision_reduction,
             m.allow_fp16_reduced_precision_reduction)
    torch.set_float32_matmul_precision(fp32_precision)
    if bf16_rpr is not None:
        m.allow_bf16_reduced_precision_reduction = bf16_rpr
    if fp16_rpr is not None:
        m.allow_fp16_reduced_precision_reduction = fp16_rpr
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(saved[0])
        m.allow_bf16_reduced_precision_reduction = saved[1]
        m.allow_fp16_reduced_precision_reduction = saved[2]


def _product(mode: str, a: torch.Tensor, b: torch.Tensor):
    """(output, the rounded inputs as float64) for one mode."""
    if mode in ("fp32", "tf32"):
        with _settings("highest" if mode == "fp32" else "high"):
            return a @ b, (a.double(), b.double())
    if mode.startswith(("bf16", "fp16")):
        dt = torch.bfloat16 if mode.startswith("bf16") else torch.float16
        a16, b16 = a.to(dt), b.to(dt)
        if mode.endswith("f32out"):
            out = torch.mm(a16, b16, out_dtype=torch.float32)
        else:
            rpr = mode.endswith("rpr")
            with _settings(bf16_rpr=rpr, fp16_rpr=rpr):
                out = a16 @ b16
        return out, (a16.double(), b16.double())
    if mode.startswith("fp8"):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()      # column-major, as cuBLASLt asks
        one = torch.ones((), device=a.device)
        out = torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.float32,
                               use_fast_accum=mode == "fp8_fast")
        return out, (a8.double(), b8.double())
    raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")


# [numerics:matmul-error-sweep]
def matmul_error_sweep(ks, mn: int = 256, modes=MODES, device: str = "cuda", seed: int = 0
                       ) -> dict:
    """For each K and mode, over the mn x mn outputs of A (mn x K) @ B (K x mn), A and B uniform
    on [0, 1): the median and maximum of |C - C_exact| / C_exact, and the mean of the signed
    (C - C_exact) / C_exact (near zero when errors fall on both sides, near minus the median
    when every output lands below the exact value), and the fractions of outputs below and above
    the exact value."""
    gen = torch.Generator(device=device).manual_seed(seed)
    rows, skipped = [], {}
    for k in ks:
        a = torch.rand(mn, k, device=device, generator=gen)
        b = torch.rand(k, mn, device=device, generator=gen)
        for mode in modes:
            if mode in skipped:
                continue
            try:
                out, (a64, b64) = _product(mode, a, b)
            except (RuntimeError, NotImplementedError, TypeError) as err:
                skipped[mode] = f"{type(err).__name__}: {str(err).splitlines()[0][:160]}"
                continue
            exact = a64 @ b64
            signed = ((out.double() - exact) / exact).flatten()
            rel = signed.abs()
            rows.append({"k": k, "mode": mode, "out_dtype": str(out.dtype).replace("torch.", ""),
                         "median": rel.median().item(), "max": rel.max().item(),
                         "mean_signed": signed.mean().item(),
                         "below": (signed < 0).double().mean().item(),
                         "above": (signed > 0).double().mean().item()})
    return {"mn": mn, "rows": rows, "skipped": skipped,
            "defaults": {"bf16_rpr": torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
                         "fp16_rpr": torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}}
# [/numerics:matmul-error-sweep]
