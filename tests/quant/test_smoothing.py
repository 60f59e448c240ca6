"""AWQ and SmoothQuant: the scaling identity in exact arithmetic, and that each does what it
claims on inputs with outlier channels; LLM.int8()'s decomposition at its limits."""

from __future__ import annotations

import torch

from infralens.quant import smoothing as S
from infralens.quant.affine import fake_quantize


def _outlier_layer(seed=0, n=64, k=256, samples=256):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen, dtype=torch.float64) / k**0.5
    x = torch.randn(samples, k, generator=gen, dtype=torch.float64)
    x[:, :4] *= 50.0                                          # four outlier input channels
    return w, x


def test_scaling_identity_is_exact():
    w, x = _outlier_layer()
    s = torch.rand(w.shape[1], dtype=torch.float64) + 0.1
    ws, xs = S.apply_scales(w, x, s)
    torch.testing.assert_close(xs @ ws.T, x @ w.T, rtol=1e-12, atol=1e-12)


def test_awq_beats_plain_rtn_and_reports_its_grid():
    w, x = _outlier_layer()
    res = S.awq_search(w, x, bits=4, group_size=64)
    rtn = float((x @ fake_quantize(w, 4, "group", 64).T - x @ w.T).pow(2).mean())
    assert res["errors"][0.0] == rtn                          # alpha = 0 is plain RTN
    assert min(res["errors"].values()) == res["errors"][res["alpha"]] < rtn
    assert len(res["errors"]) == S.AWQ_GRID


def test_smoothquant_helps_int8_activations_per_tensor():
    w, x = _outlier_layer()
    ref = x @ w.T
    plain = (S.w8a8_output(w, x, "tensor") - ref).pow(2).mean()
    smooth = (S.w8a8_output(w, x, "tensor", alpha=S.SMOOTHQUANT_ALPHA) - ref).pow(2).mean()
    assert smooth < 0.5 * plain
    s = S.smoothquant_scales(x.abs().amax(0), w, 0.5)
    xs = x / s
    assert xs.abs().amax(0).max() / xs.abs().amax(0).min() < x.abs().amax(0).max() / x.abs().amax(0).min()


def test_llm_int8_limits():
    w, x = _outlier_layer()
    exact = S.int8_decomposed_output(w, x, threshold=0.0)      # every channel is an outlier
    torch.testing.assert_close(exact, x @ w.T)
    none = S.int8_decomposed_output(w, x, threshold=float("inf"))
    torch.testing.assert_close(none, S.quantize_activations(x, 8, "token") @ fake_quantize(w, 8).T)
    mixed = S.int8_decomposed_output(w, x)
    ref = x @ w.T
    assert (mixed - ref).pow(2).mean() < (none - ref).pow(2).mean()
