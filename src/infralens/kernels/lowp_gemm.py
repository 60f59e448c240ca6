"""Prefill-sized GEMMs in 8-bit formats against BF16: how much of the doubled Tensor-Core rate
a library matmul turns into speed.

:func:`bench_lowp_gemm` times, for square problems, ``torch.mm`` in BF16, ``torch._int_mm``
(INT8 inputs, INT32 output) and ``torch._scaled_mm`` (FP8 E4M3 inputs with per-tensor scales,
BF16 output; with and without fast accumulation), through the book's one harness, and reports
TFLOP/s and each one's speed-up over BF16.
"""

from __future__ import annotations

import torch

__all__ = ["bench_lowp_gemm", "bench_formats"]


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


def _pad_rows(x: torch.Tensor, multiple: int) -> torch.Tensor:
    """``x`` with zero rows appended up to a multiple of ``multiple``: ``_int_mm`` needs more than
    16 rows; ``_scaled_mm`` accepts one, and is padded here all the same."""
    extra = -x.shape[0] % multiple
    return torch.cat([x, x.new_zeros(extra, x.shape[1])]) if extra else x


# [lowp:formats]
def bench_formats(k: int = 4096, n: int = 14336, batches=(1, 4096), group_size: int = 128,
                  device: str = "cuda") -> dict:
    """The matmul ``x (M, K) @ W (K, N)`` in every weight format of Lab 11's plan, with the kernel
    each one runs on in this book's stack, timed against BF16 cuBLAS in the same run (L2 flushed).

    INT4 weights run the book's W4A16 kernel, INT8 weights ``_weight_int8pack_mm`` (weight-only)
    and ``_int_mm`` (W8A8), E4M3 ``_scaled_mm`` with per-tensor or per-row scales. The W8A8 times are
    the GEMM alone: the activations are quantized beforehand, and ``_int_mm``'s INT32 output is not
    rescaled to BF16 (``_scaled_mm`` applies its scales and writes BF16 itself). A kernel that
    refuses a shape is recorded with its error, not skipped silently."""
    import functools

    from infralens.kernels.w4a16 import pack_w4, w4a16_matmul
    from infralens.tools.bench import bench

    gen = torch.Generator(device=device).manual_seed(0)
    w = torch.randn(k, n, device=device, generator=gen) / k**0.5
    w16 = w.bfloat16()
    w8 = (w / w.abs().amax(dim=0) * 127).round().to(torch.int8)                 # (K, N)
    w8_scale = (w.abs().amax(dim=0) / 127).bfloat16()
    packed_g, scales_g = pack_w4(w, group_size)
    packed_c, scales_c = pack_w4(w, k)
    wf8 = w.t().contiguous().to(torch.float8_e4m3fn).t()                          # column-major
    one = torch.ones((), device=device)
    rows = []
    for m in batches:
        x = torch.randn(m, k, device=device, generator=gen).bfloat16()
        x8 = _pad_rows((x.float() * 16).round().clamp(-127, 127).to(torch.int8), 32)
        xf8 = _pad_rows(x.float(), 16).to(torch.float8_e4m3fn)
        cases = {
            ("bf16", "-", "cuBLAS (torch.matmul)"): functools.partial(torch.matmul, x, w16),
            ("int4", "group", "W4A16 (this book)"): functools.partial(w4a16_matmul, x, packed_g,
                                                                      scales_g),
            ("int4", "channel", "W4A16 (this book)"): functools.partial(w4a16_matmul, x, packed_c,
                                                                        scales_c),
            ("int8", "channel", "_weight_int8pack_mm"): functools.partial(
                torch._weight_int8pack_mm, x, w8.t().contiguous(), w8_scale),
            ("int8", "channel", "_int_mm (W8A8)"): functools.partial(
                torch._int_mm, x8, w8.t().contiguous().t()),
            ("e4m3", "tensor", "_scaled_mm"): functools.partial(
                torch._scaled_mm, xf8, wf8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16),
            ("e4m3", "channel", "_scaled_mm (row-wise)"): functools.partial(
                torch._scaled_mm, xf8, wf8,
                scale_a=torch.ones(xf8.shape[0], 1, device=device),
                scale_b=torch.ones(1, n, device=device), out_dtype=torch.bfloat16),
        }
        computed = {"_int_mm (W8A8)": x8.shape[0], "_scaled_mm": xf8.shape[0],
                    "_scaled_mm (row-wise)": xf8.shape[0]}       # rows after padding
        base_timed = bench(cases[("bf16", "-", "cuBLAS (torch.matmul)")], device=device)
        base = base_timed["ms"]
        for (fmt, gran, kernel), fn in cases.items():
            row = {"m": m, "format": fmt, "granularity": gran, "kernel": kernel, "bf16_ms": base,
                   "rows_computed": computed.get(kernel, m)}
            try:
                fn()
                timed = base_timed if fmt == "bf16" else bench(fn, device=device)
            except (RuntimeError, NotImplementedError, ValueError) as err:
                row["error"] = " ".join(str(err).split())[:200]
            else:
                row.update(ms=timed["ms"], ms_q20=timed["ms_q20"], ms_q80=timed["ms_q80"],
                           speedup=base / timed["ms"])
            rows.append(row)
    return {"k": k, "n": n, "group_size": group_size, "rows": rows}
# [/lowp:formats]
