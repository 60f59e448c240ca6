"""The packaged YAML against the running torch: every declared operator is registered with the
declared schema, and each derivative entry has a formula for each differentiable input."""

from __future__ import annotations

import re

import pytest
import torch

from infralens.dispatch.codegen import (
    DERIVATIVES,
    NATIVE_FUNCTIONS,
    derivatives_entry,
    native_functions_entry,
)

OVERLOADS = ["add.Tensor", "add.out", "mul.Tensor", "mm", "relu", "sum.dim_IntList", "addmm"]


def schema_of(name: str) -> str:
    """The schema the dispatcher registered for ``aten::<name>``, without the namespace."""
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base)
    return str(getattr(packet, overload or "default")._schema).removeprefix("aten::")


@pytest.mark.parametrize("name", OVERLOADS)
def test_entry_starts_with_the_registered_schema(name):
    entry = native_functions_entry(name)
    first, *rest = entry.splitlines()
    assert first == f"- func: {schema_of(name)}"
    assert all(line.startswith("  ") for line in rest)  # the entry's own keys, indented


def test_every_declared_function_is_registered():
    names = re.findall(r"^- func: ([\w.]+)\(", NATIVE_FUNCTIONS.read_text(), re.M)
    assert len(names) > 2000
    for name in names:
        base, _, overload = name.partition(".")
        torch._C._dispatch_find_schema_or_throw(f"aten::{base}", overload)  # raises if unknown


@pytest.mark.parametrize("path, finder, key", [(NATIVE_FUNCTIONS, native_functions_entry, "func"),
                                               (DERIVATIVES, derivatives_entry, "name")])
def test_an_entry_is_one_whole_block_of_the_file(path, finder, key):
    text = path.read_text()
    entry = finder("mul.Tensor")
    start = text.index(entry)
    assert text[start - 1] == "\n"
    after = text[start + len(entry):]
    assert after.startswith(("\n\n", "\n- ")) or after in ("", "\n")  # ends where the block ends
    assert entry.count(f"- {key}: ") == 1 and "\n\n" not in entry


def test_structured_delegate_of_add():
    entry = native_functions_entry("add.Tensor")
    assert "  structured_delegate: add.out" in entry.splitlines()
    assert "  structured: True" in native_functions_entry("add.out").splitlines()


@pytest.mark.parametrize("name, node", [("mul.Tensor", "MulBackward0"), ("mm", "MmBackward0")])
def test_derivative_formulas_cover_the_tensor_inputs_and_name_what_the_node_saves(name, node):
    entry = derivatives_entry(name)
    assert entry.splitlines()[0] == f"- name: {schema_of(name)}"
    formulas = dict(re.findall(r"^  (\w+): (.*)$", entry, re.M))
    base, _, overload = name.partition(".")
    schema = getattr(getattr(torch.ops.aten, base), overload or "default")._schema
    tensor_inputs = {a.name for a in schema.arguments if isinstance(a.type, torch.TensorType)}
    assert tensor_inputs <= set(formulas)
    # each input's formula uses the other input: the generated node saves both
    a, b = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2, requires_grad=True)
    out = torch.ops.aten.mul.Tensor(a, b) if base == "mul" else torch.ops.aten.mm(a, b)
    assert type(out.grad_fn).__name__ == node
    for arg in tensor_inputs:
        assert hasattr(out.grad_fn, f"_saved_{arg}")
        others = tensor_inputs - {arg}
        assert any(re.search(rf"\b{o}\b", formulas[arg]) for o in others)


@pytest.mark.parametrize("finder", [native_functions_entry, derivatives_entry])
def test_unknown_names_raise(finder):
    with pytest.raises(KeyError, match="no_such_op"):
        finder("no_such_op")
    with pytest.raises(KeyError):
        finder("ad")  # a prefix of add is not add
