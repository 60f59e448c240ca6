"""The graph walk of loss = sum(h * sigmoid(h)), h = X @ W, against the structure of that
expression and against ``next_functions`` read node by node."""

from __future__ import annotations

import pytest
import torch

from infralens.autograd.graph import GraphNode, saved, walk


@pytest.fixture()
def layer():
    X = torch.randn(4, 3, requires_grad=True)
    W = torch.randn(3, 2, requires_grad=True)
    H = X @ W
    S = torch.sigmoid(H)
    loss = (H * S).sum()
    return X, W, H, S, loss


def test_walk_of_a_known_expression(layer):
    X, W, H, S, loss = layer
    nodes = walk(loss)
    # by hand: sum <- mul <- (mm, sigmoid); sigmoid <- mm; mm <- (X, W)
    assert [(n.index, n.name, n.inputs) for n in nodes] == [
        (0, "SumBackward0", (1,)),
        (1, "MulBackward0", (2, 3)),
        (2, "MmBackward0", (4, 5)),
        (3, "SigmoidBackward0", (2,)),  # the same mm node, reached a second time, appears once
        (4, "AccumulateGrad", ()),
        (5, "AccumulateGrad", ()),
    ]
    assert nodes[4].leaf_shape == tuple(X.shape) and nodes[5].leaf_shape == tuple(W.shape)
    assert all(n.leaf_shape is None for n in nodes[:4])
    assert all(isinstance(n, GraphNode) for n in nodes)


def test_walk_follows_next_functions(layer):
    X, W, H, S, loss = layer
    nodes = walk(loss)
    # the actual Node objects, reached through next_functions by hand
    mul = loss.grad_fn.next_functions[0][0]
    mm, sig = (f for f, _ in mul.next_functions)
    acc_x, acc_w = (f for f, _ in mm.next_functions)
    objects = [loss.grad_fn, mul, mm, sig, acc_x, acc_w]
    assert mm is H.grad_fn and sig is S.grad_fn and sig.next_functions[0][0] is mm
    assert acc_x.variable is X and acc_w.variable is W
    for node, obj in zip(nodes, objects, strict=True):
        assert node.name == type(obj).__name__
        assert node.inputs == tuple(objects.index(f) for f, _ in obj.next_functions)


def test_an_input_without_gradient_is_none():
    x = torch.randn(3, requires_grad=True)
    c = torch.randn(3)  # needs no gradient: no node
    y = x * c + c
    nodes = walk(y)
    assert [n.name for n in nodes] == ["AddBackward0", "MulBackward0", "AccumulateGrad"]
    assert nodes[0].inputs == (1, None) and nodes[1].inputs == (2, None)
    assert y.grad_fn.next_functions[1] == (None, 0)


@pytest.mark.parametrize("make", [lambda: torch.randn(2, requires_grad=True),
                                  lambda: torch.randn(2) * 2,
                                  lambda: _no_grad_product()])
def test_a_tensor_without_grad_fn_is_refused(make):
    with pytest.raises(ValueError, match="no grad_fn"):
        walk(make())


def _no_grad_product() -> torch.Tensor:
    w = torch.randn(2, requires_grad=True)
    with torch.no_grad():
        return w * 2


def test_saved_values_are_the_forward_tensors(layer):
    X, W, H, S, loss = layer
    mm = saved(H.grad_fn)
    assert torch.equal(mm["self"], X) and torch.equal(mm["mat2"], W)
    assert mm["self_sym_sizes"] == (4, 3) and mm["mat2_sym_sizes"] == (3, 2)
    assert set(mm) == {a.removeprefix("_saved_") for a in dir(H.grad_fn) if a.startswith("_saved_")}
    sig = saved(S.grad_fn)
    assert set(sig) == {"result"} and torch.equal(sig["result"], torch.sigmoid(H))
    mul = saved(loss.grad_fn.next_functions[0][0])
    assert torch.equal(mul["self"], H) and torch.equal(mul["other"], S)
    assert walk(loss)[1].saved == tuple(sorted(mul))
    assert saved(H.grad_fn.next_functions[0][0]) == {}  # AccumulateGrad saves nothing


def test_saved_values_are_freed_by_backward(layer):
    X, W, H, S, loss = layer
    loss.backward()
    after = saved(H.grad_fn)
    assert after["self"] == "<freed>" and after["mat2"] == "<freed>"
    assert after["self_sym_sizes"] == (4, 3)  # sizes are plain values, kept
    assert saved(S.grad_fn) == {"result": "<freed>"}
