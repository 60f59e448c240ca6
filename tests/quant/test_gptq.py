"""GPTQ against Optimal Brain Surgeon: the Cholesky, lazy-batch algorithm against an explicit
inverse per column, and the first step's error against the OBS formula."""

from __future__ import annotations

import pytest
import torch

from infralens.quant.affine import fake_quantize, quantize
from infralens.quant.gptq import gptq_quantize, hessian, layer_error, obs_reference


def _layer(seed=0, n=12, k=48, samples=512):
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=gen, dtype=torch.float64)
    mix = torch.randn(k, k, generator=gen, dtype=torch.float64) / k**0.5   # correlated inputs
    x = torch.randn(samples, k, generator=gen, dtype=torch.float64) @ (torch.eye(k) + mix)
    return w, x


@pytest.mark.parametrize("block", [1, 8, 48])
def test_gptq_equals_the_explicit_obs_sequence(block):
    w, x = _layer()
    torch.testing.assert_close(gptq_quantize(w, x, 3, block_size=block), obs_reference(w, x, 3))


def test_first_step_costs_what_the_obs_formula_says():
    w, x = _layer(1, n=5, k=10)
    H = hessian(x)
    Hinv = torch.linalg.inv(H)
    q0 = fake_quantize(w, 3)[:, 0]
    delta = (w[:, 0] - q0) / Hinv[0, 0]
    w_new = w - delta[:, None] * Hinv[0][None, :]                 # the OBS update
    assert torch.allclose(w_new[:, 0], q0)
    # the damped Hessian defines the loss the formula speaks about: (1/2) d^T H d per row
    d = w - w_new
    loss = 0.5 * torch.einsum("ri,ij,rj->r", d, H, d)
    torch.testing.assert_close(loss, (w[:, 0] - q0) ** 2 / (2 * Hinv[0, 0]))
    # and no other update that puts column 0 on q0 does better
    alt = w.clone()
    alt[:, 0] = q0
    d_alt = w - alt
    assert (0.5 * torch.einsum("ri,ij,rj->r", d_alt, H, d_alt) >= loss - 1e-9).all()


def test_gptq_beats_round_to_nearest_on_correlated_inputs():
    w, x = _layer(2, n=32, k=128)
    for gs in (None, 32):
        g = gptq_quantize(w, x, 4, group_size=gs, block_size=64)
        r = fake_quantize(w, 4, "group" if gs else "channel", gs)
        assert layer_error(w, g, x) < 0.9 * layer_error(w, r, x)
        # each row of each group holds at most 2^bits distinct levels
        assert len(torch.unique(g[0, :32])) <= 16


def test_grouping_must_align():
    w, x = _layer()
    with pytest.raises(ValueError, match="group_size"):
        gptq_quantize(w, x, 4, group_size=10)
    assert quantize(w, 4).bits == 4
