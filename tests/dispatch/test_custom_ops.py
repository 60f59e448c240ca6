"""The NumPy SiLU as a custom operator: its values and gradient against PyTorch's own SiLU in
float64, its registrations through ``torch.library.opcheck``, and one graph under Dynamo."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infralens.dispatch.custom_ops import silu_numpy
from tests.tensors import seeded_randn

rand = seeded_randn(11)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_values_are_pytorch_silu(dtype):
    x = (rand(4, 5) * 4).to(dtype)
    out = silu_numpy(x)
    assert out.dtype == dtype and out.shape == x.shape
    torch.testing.assert_close(out, F.silu(x))
    x64 = x.double()
    torch.testing.assert_close(out.double(), x64 / (1 + torch.exp(-x64)),
                               **({} if dtype == torch.float32 else {"rtol": 1e-15, "atol": 1e-15}))


def test_gradient_is_pytorch_silu_gradient():
    x = (rand(6, 3) * 3).requires_grad_()
    g = rand(6, 3)
    (dx,) = torch.autograd.grad(silu_numpy(x), x, g)
    (ref,) = torch.autograd.grad(F.silu(x), x, g)
    torch.testing.assert_close(dx, ref, rtol=1e-14, atol=1e-14)


def test_gradcheck_and_gradgradcheck_float64():
    x = (rand(7) * 3).requires_grad_()
    assert torch.autograd.gradcheck(silu_numpy, (x,))
    assert torch.autograd.gradgradcheck(silu_numpy, (x,))  # the backward is made of torch ops


def test_opcheck_passes():
    checks = torch.library.opcheck(silu_numpy, (torch.randn(4, 3, requires_grad=True),))
    assert set(checks) >= {"test_schema", "test_autograd_registration", "test_faketensor",
                           "test_aot_dispatch_dynamic"}
    assert set(checks.values()) == {"SUCCESS"}


def test_fake_and_real_outputs_agree_on_a_transposed_input():
    x = torch.randn(3, 4).t()
    real, fake = silu_numpy(x), silu_numpy(x.to("meta"))
    assert real.is_contiguous() and (fake.shape, fake.stride()) == (real.shape, real.stride())
    assert set(torch.library.opcheck(silu_numpy, (x,)).values()) == {"SUCCESS"}


def test_fake_kernel_on_meta_tensors():
    out = silu_numpy(torch.empty(2, 9, device="meta", dtype=torch.float64))
    assert out.device.type == "meta" and out.shape == (2, 9) and out.dtype == torch.float64


def f(t: torch.Tensor) -> torch.Tensor:
    return silu_numpy(t * 2) + 1


def test_compiles_as_one_graph_and_matches_silu():
    torch._dynamo.reset()
    compiled = torch.compile(f, backend="eager", fullgraph=True)  # fullgraph: a break is an error
    x = rand(5).float()
    torch.testing.assert_close(compiled(x), F.silu(x * 2) + 1)
    explained = torch._dynamo.explain(f)(rand(4).float())
    assert explained.graph_count == 1 and explained.graph_break_count == 0
    targets = [n.target for n in explained.graphs[0].graph.nodes if n.op == "call_function"]
    assert torch.ops.infralens.silu_numpy.default in targets
    torch._dynamo.reset()
