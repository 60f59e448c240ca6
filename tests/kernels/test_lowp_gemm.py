"""The 8-bit GEMM benchmark's bookkeeping, run on the CPU at a small size."""

import pytest

from infralens.kernels.lowp_gemm import bench_lowp_gemm


def test_rows_are_consistent_on_cpu():
    try:
        res = bench_lowp_gemm((64,), device="cpu")
    except (RuntimeError, NotImplementedError) as err:      # an op this CPU build lacks
        pytest.skip(f"CPU build lacks an 8-bit GEMM: {err}")
    row = res["rows"][0]
    assert row["n"] == 64
    for name in ("int8", "fp8", "fp8_fast"):
        assert row[f"{name}_speedup"] == pytest.approx(row["bf16_ms"] / row[f"{name}_ms"])
        assert row[f"{name}_tflops"] == pytest.approx(2 * 64**3 / row[f"{name}_ms"] / 1e9)
