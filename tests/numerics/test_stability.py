"""log-sum-exp, z-loss, soft-capping and the non-finite finder against torch and analytic forms."""

from __future__ import annotations

import torch
from torch import nn

from infralens.numerics import stability as S


def test_logsumexp_matches_torch_where_the_naive_form_overflows():
    z = torch.tensor([[1000.0, 1000.0, 999.0], [-5.0, 0.0, 3.0]])
    torch.testing.assert_close(S.logsumexp_stable(z), torch.logsumexp(z, dim=-1))
    assert torch.isinf(z.exp().sum(-1).log()[0])


def test_z_loss_value_and_gradient():
    logits = torch.randn(5, 7, dtype=torch.float64, requires_grad=True)
    loss = S.z_loss(logits, coeff=0.1)
    log_z = torch.logsumexp(logits, -1)
    torch.testing.assert_close(loss, 0.1 * (log_z**2).mean())
    loss.backward()
    want = 2 * 0.1 * log_z.detach()[:, None] * torch.softmax(logits.detach(), -1) / 5
    torch.testing.assert_close(logits.grad, want)
    assert S.PALM_Z_LOSS_COEFF == 1e-4


def test_soft_cap_bounds_and_identity_near_zero():
    x = torch.linspace(-1000, 1000, 2001)
    y = S.soft_cap(x, 30.0)
    assert y.abs().max() <= 30.0 and (y[1:] >= y[:-1]).all()
    small = torch.tensor([1e-3, -2e-3])
    torch.testing.assert_close(S.soft_cap(small, 30.0), small)


def test_first_nonfinite_names_the_origin():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.LayerNorm(4)).half()
    x = torch.randn(2, 4, dtype=torch.float16)
    assert S.first_nonfinite(net, x) is None
    with torch.no_grad():
        net[2].weight.fill_(6e4)
        net[0].bias.fill_(1.0)
    assert S.first_nonfinite(net, x) == "2"
    assert all(not m._forward_hooks for m in net.modules())      # hooks removed
