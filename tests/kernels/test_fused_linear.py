"""GEMM epilogue fusion: the fused kernel against float64 at irregular shapes (interpreted), the
byte model against the operators eager PyTorch runs, and bad input refused."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import math  # noqa: E402

import torch  # noqa: E402

from infralens.kernels import fused_linear as fl  # noqa: E402
from tests.tensors import aten_traffic  # noqa: E402


def _ulp(dtype: torch.dtype, magnitude: float) -> float:
    """The spacing of ``dtype`` values at ``magnitude``."""
    return torch.finfo(dtype).eps * 2.0 ** math.floor(math.log2(magnitude))


def test_fused_kernel_rounds_once_and_beats_eager_in_fp16():
    for row in fl.epilogue_errors(dtype=torch.float16):
        # one rounding of an FP32 epilogue: within half a unit in the last place (plus the FP32 sum)
        assert row["fused"] <= 0.51 * _ulp(torch.float16, row["ref_max"]), row
        assert row["fused"] < row["eager"], row  # eager rounds four times


def test_split_epilogue_gives_the_same_bits():
    from infralens.kernels.triton_matmul import INTERPRET_CONFIG

    gen = torch.Generator().manual_seed(2)
    x, w = torch.randn(37, 80, generator=gen).half(), torch.randn(48, 80, generator=gen).half()
    b, r = torch.randn(48, generator=gen).half(), torch.randn(37, 48, generator=gen).half()
    whole = fl.linear_gelu_residual(x, w, b, r, config={**INTERPRET_CONFIG, "SPLIT": 1})
    halves = fl.linear_gelu_residual(x, w, b, r, config={**INTERPRET_CONFIG, "SPLIT": 2})
    assert torch.equal(whole, halves)


def test_fused_kernel_bf16_within_one_ulp():
    # the interpreter truncates FP32 -> BF16 stores, so one rounding costs up to one unit here
    for row in fl.epilogue_errors(dtype=torch.bfloat16, shapes=fl.CHECK_SHAPES[:1]):
        assert row["fused"] <= 1.01 * _ulp(torch.bfloat16, row["ref_max"]), row


def test_epilogue_bytes_match_the_operators_eager_runs():
    M, K, N = 6, 8, 10
    x, w, b, r = torch.randn(M, K), torch.randn(N, K), torch.randn(N), torch.randn(M, N)
    rows = aten_traffic(fl.linear_gelu_residual_eager, x, w, b, r)
    assert [op for op, *_ in rows] == ["mm", "add", "gelu", "add"]  # one kernel each
    mm_write = rows[0][2]
    elementwise = sum(rd + wr for _, rd, wr in rows[1:])
    model = fl.epilogue_bytes(M, N, 4)
    assert model["unfused"] == mm_write + elementwise
    assert model["fused"] == 4 * (2 * M * N + N)  # write out; read r and b
    assert model["saved"] == 4 * 6 * M * N


def test_horizontal_linears_equal_separate_ones():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(7, 32, generator=gen, dtype=torch.float64)
    ws = [torch.randn(n, 32, generator=gen, dtype=torch.float64) for n in (32, 8, 8)]
    for got, w in zip(fl.horizontal_linears(x, *fl.stack_weights(ws)), ws, strict=True):
        torch.testing.assert_close(got, x @ w.t())


@pytest.mark.parametrize("change, match", [
    (lambda x, w, b, r: (x.float(), w.float(), b.float(), r.float()), "bfloat16 or float16"),
    (lambda x, w, b, r: (x, w[:, :8], b, r), "need"),
    (lambda x, w, b, r: (x, w, b[:3], r), "bias"),
    (lambda x, w, b, r: (x, w, b, r.half()), "one dtype"),
    (lambda x, w, b, r: (x[:, :12], w[:, :12], b, r), "16-byte"),
])
def test_bad_input_is_refused(change, match):
    x, w, b, r = (torch.randn(4, 16).bfloat16(), torch.randn(24, 16).bfloat16(),
                  torch.randn(24).bfloat16(), torch.randn(4, 24).bfloat16())
    x, w, b, r = change(x, w, b, r)
    with pytest.raises(ValueError, match=match):
        fl.linear_gelu_residual(x.contiguous(), w.contiguous(), b, r)

