"""Round-to-nearest affine quantization against a float64 reference written out per element."""

from __future__ import annotations

import pytest
import torch

from infralens.quant.affine import dequantize, fake_quantize, quantize


def _reference(row, bits, symmetric):
    """One group, element by element, in Python floats."""
    vals = [float(v) for v in row]
    if symmetric:
        qmax = 2 ** (bits - 1) - 1
        scale = max(abs(v) for v in vals) / qmax
        return [min(max(round(v / scale), -qmax - 1), qmax) * scale for v in vals]
    lo, hi = min(vals), max(vals)
    scale = (hi - lo) / (2**bits - 1)
    zero = round(-lo / scale)
    return [(min(max(round(v / scale) + zero, 0), 2**bits - 1) - zero) * scale for v in vals]


@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("bits", [3, 4, 8])
def test_groups_match_the_elementwise_reference(bits, symmetric):
    torch.manual_seed(bits)
    w = torch.randn(6, 64, dtype=torch.float64)
    got = dequantize(quantize(w, bits, "group", 16, symmetric))
    for r in range(6):
        for g0 in range(0, 64, 16):
            want = _reference(w[r, g0:g0 + 16], bits, symmetric)
            torch.testing.assert_close(got[r, g0:g0 + 16], torch.tensor(want, dtype=torch.float64))


def test_granularity_orders_the_error():
    torch.manual_seed(0)
    w = torch.randn(64, 256, dtype=torch.float64) * torch.logspace(-1, 1, 64, dtype=torch.float64)[:, None]
    err = {g: (fake_quantize(w, 4, g, 32) - w).pow(2).mean().item() for g in ("tensor", "channel", "group")}
    assert err["group"] < err["channel"] < err["tensor"]


def test_error_is_at_most_half_a_step_inside_the_range():
    w = torch.randn(4, 128, dtype=torch.float64)
    qt = quantize(w, 4, "channel")
    assert ((dequantize(qt) - w).abs() <= qt.scale.reshape(4, 1) / 2 + 1e-15).all()
    assert qt.q.min() >= -8 and qt.q.max() <= 7


def test_bad_arguments_are_refused():
    w = torch.randn(4, 30)
    with pytest.raises(ValueError, match="group_size"):
        quantize(w, 4, "group", 16)
    with pytest.raises(ValueError, match="granularity"):
        quantize(w, 4, "block")
    with pytest.raises(ValueError, match="bits"):
        quantize(w, 1)
    with pytest.raises(ValueError, match="2-D"):
        quantize(torch.randn(3), 4)
