"""Walk the graph autograd recorded during a forward pass.

Each tensor produced by a differentiable operation on a tensor that requires grad holds a
``grad_fn``: a ``Node`` (``MulBackward0``, ``AddmmBackward0``, ...) whose ``next_functions`` are
the nodes that produced its inputs, one ``(node, input_nr)`` pair per input (``None`` where the
input needs no gradient). Leaves end in ``AccumulateGrad`` nodes that own the ``.grad`` of a
parameter. What a node keeps for backward shows up as its ``_saved_*`` attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["GraphNode", "walk", "saved"]


@dataclass(frozen=True)
class GraphNode:
    index: int  # order of discovery, from the output's grad_fn (0) breadth first
    name: str  # the node's class name, e.g. "MulBackward0"
    inputs: tuple[int | None, ...]  # indices of next_functions (None: no gradient flows there)
    leaf_shape: tuple[int, ...] | None  # for AccumulateGrad: the shape of the leaf it feeds
    saved: tuple[str, ...]  # names of the node's saved values (see :func:`saved`)


def saved(node) -> dict[str, object]:
    """The values a node saved for backward: ``{'self': Tensor, 'other': Tensor, ...}``."""
    out = {}
    for attr in dir(node):
        if attr.startswith("_saved_"):
            try:
                out[attr.removeprefix("_saved_")] = getattr(node, attr)
            except RuntimeError:  # freed after backward ran
                out[attr.removeprefix("_saved_")] = "<freed>"
    return out


def walk(t: torch.Tensor) -> list[GraphNode]:
    """The graph behind ``t``, breadth first from ``t.grad_fn``; each node appears once."""
    if t.grad_fn is None:
        raise ValueError("tensor has no grad_fn: it is a leaf or was computed without grad")
    order: list = [t.grad_fn]
    index = {t.grad_fn: 0}
    nodes: list[GraphNode] = []
    i = 0
    while i < len(order):
        node = order[i]
        ins: list[int | None] = []
        for nxt, _ in node.next_functions:
            if nxt is None:
                ins.append(None)
                continue
            if nxt not in index:
                index[nxt] = len(order)
                order.append(nxt)
            ins.append(index[nxt])
        var = getattr(node, "variable", None)
        nodes.append(GraphNode(i, type(node).__name__, tuple(ins),
                               tuple(var.shape) if var is not None else None,
                               tuple(saved(node))))
        i += 1
    return nodes
