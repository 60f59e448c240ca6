"""The hand-written SiLU node against PyTorch's ``F.silu`` in float64, finite differences, the
bytes it saves, and the version check on what it saved."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infralens.autograd.functions import SiLU
from infralens.memory.measure import saved_bytes
from tests.tensors import seeded_randn

rand = seeded_randn(5)


def test_forward_is_silu():
    x = rand(5, 6) * 4
    torch.testing.assert_close(SiLU.apply(x), F.silu(x), rtol=1e-15, atol=1e-15)
    torch.testing.assert_close(SiLU.apply(x), x / (1 + torch.exp(-x)), rtol=1e-15, atol=1e-15)


def test_backward_is_silu_backward():
    x = (rand(5, 6) * 4).requires_grad_()
    g = rand(5, 6)
    (mine,) = torch.autograd.grad(SiLU.apply(x), x, g)
    (ref,) = torch.autograd.grad(F.silu(x), x, g)
    torch.testing.assert_close(mine, ref, rtol=1e-14, atol=1e-14)


def test_gradcheck_float64():
    x = (rand(8) * 3).requires_grad_()
    assert torch.autograd.gradcheck(SiLU.apply, (x,))
    assert torch.autograd.gradgradcheck(SiLU.apply, (x,))


def test_node_is_the_custom_backward():
    x = torch.randn(3, requires_grad=True)
    y = SiLU.apply(x)
    assert type(y.grad_fn).__name__ == "SiLUBackward"
    assert len(y.grad_fn.saved_tensors) == 1 and y.grad_fn.saved_tensors[0] is x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_saves_one_tensor_where_two_ops_save_two(dtype):
    x = torch.randn(64, 32, dtype=dtype, requires_grad=True)
    one = x.numel() * x.element_size()
    assert saved_bytes(SiLU.apply, x) == one
    assert saved_bytes(lambda t: t * torch.sigmoid(t), x) == 2 * one  # x and sigmoid(x)


def test_in_place_write_to_a_saved_tensor_is_caught():
    leaf = torch.randn(3, requires_grad=True)
    hidden = leaf * 2
    y = SiLU.apply(hidden)
    hidden.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


def test_in_place_write_before_saving_is_fine():
    leaf = torch.randn(3, dtype=torch.float64, requires_grad=True)
    hidden = leaf * 2
    hidden.add_(1)  # before the node saves it: the saved version is the current one
    SiLU.apply(hidden).sum().backward()
    z = 2 * leaf.detach() + 1
    s = torch.sigmoid(z)
    torch.testing.assert_close(leaf.grad, 2 * s * (1 + z * (1 - s)), rtol=1e-14, atol=1e-14)
