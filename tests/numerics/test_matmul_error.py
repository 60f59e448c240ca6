"""The matmul error probe on the CPU at small sizes: its bookkeeping against float64 and Higham's
bound."""

from __future__ import annotations

import pytest

from infralens.numerics.matmul_error import matmul_error_sweep
from infralens.numerics.summation import gamma


def test_matmul_error_sweep_on_cpu():
    res = matmul_error_sweep([64, 512], mn=16, modes=("fp32", "bf16", "bf16_f32out", "fp8"),
                             device="cpu")
    rows = {(r["mode"], r["k"]): r for r in res["rows"]}
    for k in (64, 512):
        assert rows["fp32", k]["max"] <= gamma(k, 2.0**-24)
        assert rows["bf16", k]["max"] <= 2.0**-8 * 1.01          # only the output rounding
        assert rows["bf16", k]["out_dtype"] == "bfloat16"
        r = rows["fp32", k]
        assert 0 <= r["below"] <= 1 and r["below"] + r["above"] <= 1
    assert "bf16_f32out" in res["skipped"] or ("bf16_f32out", 64) in rows
    with pytest.raises(ValueError, match="unknown mode"):
        matmul_error_sweep([16], mn=4, modes=("int3",), device="cpu")
