"""The example functions against float64 references written out here."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from infralens.compiler.examples import bias_gelu_residual, normalize_if_large, rms_norm, scale
from tests.tensors import seeded_randn

rand = seeded_randn(7)


def gelu_tanh(z: float) -> float:
    """0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3))), Hendrycks & Gimpel's approximation."""
    return 0.5 * z * (1 + math.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def test_bias_gelu_residual_is_residual_plus_tanh_gelu():
    x, bias, residual = rand(3, 5) * 3, rand(5), rand(3, 5)
    out = bias_gelu_residual(x, bias, residual)
    torch.testing.assert_close(out, residual + F.gelu(x + bias, approximate="tanh"), rtol=1e-15, atol=1e-15)
    by_hand = torch.tensor([[residual[i, j].item() + gelu_tanh((x[i, j] + bias[j]).item()) for j in range(5)]
                            for i in range(3)], dtype=torch.float64)
    torch.testing.assert_close(out, by_hand, rtol=1e-13, atol=1e-13)
    # the tanh form, not the erf form: they differ by up to ~1e-3
    assert (out - (residual + F.gelu(x + bias))).abs().max() > 1e-5


def rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    rows = []
    for row in x.tolist():
        rms = math.sqrt(sum(v * v for v in row) / len(row) + eps)
        rows.append([v / rms * w for v, w in zip(row, weight.tolist(), strict=True)])
    return torch.tensor(rows, dtype=torch.float64)


@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_float64(eps):
    x, w = rand(4, 8) * 2, rand(8)
    out = rms_norm(x, w, eps) if eps != 1e-6 else rms_norm(x, w)
    torch.testing.assert_close(out, rms_norm_reference(x, w, eps), rtol=1e-14, atol=1e-14)


def test_rms_norm_float32_against_float64():
    x, w = rand(16, 64), rand(64)
    out = rms_norm(x.float(), w.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), rms_norm_reference(x.float().double(), w.float().double(), 1e-6),
                               rtol=1e-5, atol=1e-6)


def test_rms_norm_rows_have_unit_rms_with_unit_weight():
    out = rms_norm(rand(3, 100) * 7, torch.ones(100, dtype=torch.float64), eps=0.0)
    torch.testing.assert_close(out.pow(2).mean(-1), torch.ones(3, dtype=torch.float64))


def test_normalize_if_large_both_branches():
    small = rand(6).clamp(-0.9, 0.9)
    torch.testing.assert_close(normalize_if_large(small), torch.tanh(small), rtol=0, atol=0)
    big = rand(6).clamp(-1.4, 1.4) * 5  # |values| <= 7: the -7.5 below is the largest
    big[2] = -7.5
    torch.testing.assert_close(normalize_if_large(big), torch.tanh(big / 7.5), rtol=1e-15, atol=1e-15)


def test_scale_is_relu_times_k():
    x = rand(9)
    expected = torch.tensor([max(v, 0.0) * 2.5 for v in x.tolist()], dtype=torch.float64)
    torch.testing.assert_close(scale(x, 2.5), expected, rtol=0, atol=0)
