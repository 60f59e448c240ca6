"""Prefill-sized GEMMs in 8-bit formats against BF16: how much of the doubled Tensor-Core rate
a library matmul turns into speed.

:func:`bench_lowp_gemm` times, for square problems, ``torch.mm`` in BF16, ``torch._int_mm``
(INT8 inputs, INT32 output) and ``torch._scaled_mm`` (FP8 E4M3 inputs with per-tensor scales,
BF16 output; with and without fast accumulation), through the book's one harness, and reports
TFLOP/s and each one's speed-up over BF16.
"""

from __future__ import annotations

import torch

__all__ = ["bench_lowp_gemm"]


# [lowp:bench]
def bench_lowp_gemm(sizes=(4096, 8192), device: str = "cuda") -> dict:
    import functools

    from infralens.tools.bench import bench

    rows = []
    for n in sizes:
        gen = torch.Generator(device=device).manual_seed(0)
        a = torch.randn(n, n, device=device, generator=gen)
        b = torch.randn(n, n, device=device, generator=gen)
        a16, b16 = a.bfloat16(), b.bfloat16()
        a8 = (a * 16).round().clamp(-127, 127).to(torch.int8)
        b8 = (b * 16).round().clamp(-127, 127).to(torch.int8).t().contiguous().t()
        af8 = a.to(torch.float8_e4m3fn)
        bf8 = b.t().contiguous().to(torch.float8_e4m3fn).t()             # column-major
        one = torch.ones((), device=device)
        scaled = functools.partial(torch._scaled_mm, af8, bf8, scale_a=one, scale_b=one,
                                   out_dtype=torch.bfloat16)
        cases = {
            "bf16": functools.partial(torch.mm, a16, b16),
            "int8": functools.partial(torch._int_mm, a8, b8),
            "fp8": scaled,
            "fp8_fast": functools.partial(scaled, use_fast_accum=True),
        }
        flops = 2 * n**3
        times = {name: bench(fn, device=device)["ms"] for name, fn in cases.items()}
        rows.append({"n": n, **{f"{k}_ms": t for k, t in times.items()},
                     **{f"{k}_tflops": flops / t / 1e9 for k, t in times.items()},
                     **{f"{k}_speedup": times["bf16"] / t for k, t in times.items() if k != "bf16"}})
    return {"rows": rows}
# [/lowp:bench]
