"""Dispatch keys, tables and logging modes, checked against the dispatcher's own queries.

Every reading of :mod:`infralens.dispatch.keys` is compared with what ``torch._C`` answers
directly: ``DispatchKeySet.has`` and ``highestPriorityTypeId`` for key sets,
``_dispatch_has_kernel_for_dispatch_key`` for a table's rows, ``CompositeImplicitAutograd`` for
the decomposition a dispatch mode sees.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infralens.dispatch.keys import AtenLog, TorchLog, dispatch_table, tensor_keys, thread_keys

DK = torch._C.DispatchKey

# runtime keys whose presence is compared one by one with DispatchKeySet.has (alias keys such as
# "Autograd" answer True for any member of their alias set, so they are not listed)
LISTED = ("CPU", "Meta", "SparseCPU", "Conjugate", "Negative", "ADInplaceOrView", "AutogradCPU",
          "AutogradMeta", "AutogradOther", "AutogradNestedTensor", "AutocastCPU", "AutocastCUDA",
          "Python", "Functionalize", "BackendSelect")


def assert_same_keys(names: list[str], keyset) -> None:
    """``names`` lists exactly the LISTED keys ``keyset`` has, and nothing it lacks."""
    for key in LISTED:
        assert (key in names) == keyset.has(getattr(DK, key)), (key, names, keyset)
    # keys the Python enum names (it lacks a few, such as AutocastMTIA) must be in the set
    assert all(keyset.has(getattr(DK, k)) for k in names if hasattr(DK, k))
    assert len(set(names)) == len(names)


def _tensors() -> dict[str, torch.Tensor]:
    with torch.inference_mode():
        inference = torch.randn(2)
    return {"plain": torch.randn(2), "requires_grad": torch.randn(2, requires_grad=True),
            "inference": inference, "meta": torch.empty(2, device="meta"),
            "conj": torch.randn(2, dtype=torch.cfloat).conj(), "sparse": torch.randn(3).to_sparse()}


@pytest.mark.parametrize("name", list(_tensors()))
def test_tensor_keys_are_the_keys_the_dispatcher_reports(name):
    t = _tensors()[name]
    keys = tensor_keys(t)
    keyset = torch._C._dispatch_keys(t)
    assert_same_keys(keys, keyset)
    # lowest priority first: the last key is the one the dispatcher tries first
    assert keys[-1] == keyset.highestPriorityTypeId().name


def test_inference_tensors_skip_the_autograd_layers():
    t = _tensors()
    assert t["inference"].is_inference()
    assert {"AutogradCPU", "ADInplaceOrView"} <= set(tensor_keys(t["plain"]))
    assert not {"AutogradCPU", "ADInplaceOrView"} & set(tensor_keys(t["inference"]))
    # requires_grad is a flag, not a key: the autograd kernel runs for both
    assert tensor_keys(t["plain"]) == tensor_keys(t["requires_grad"])
    assert "Meta" in tensor_keys(t["meta"]) and "CPU" not in tensor_keys(t["meta"])
    assert "Conjugate" in tensor_keys(t["conj"]) and "Conjugate" not in tensor_keys(t["plain"])


def read_thread() -> tuple[dict[str, list[str]], tuple]:
    return thread_keys(), (torch._C._dispatch_tls_local_include_set(),
                           torch._C._dispatch_tls_local_exclude_set())


def test_thread_keys_are_the_thread_local_sets():
    keys, (include, exclude) = read_thread()
    assert_same_keys(keys["include"], include)
    assert_same_keys(keys["exclude"], exclude)


def test_autocast_removes_its_key_from_the_exclude_set_and_restores_it():
    outside, _ = read_thread()
    assert "AutocastCPU" in outside["exclude"]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside, (_, exclude) = read_thread()
    assert not exclude.has(DK.AutocastCPU)
    assert_same_keys(inside["exclude"], exclude)
    assert set(outside["exclude"]) - set(inside["exclude"]) == {"AutocastCPU"}
    assert inside["include"] == outside["include"]
    assert thread_keys() == outside


def test_inference_mode_edits_both_sets():
    outside = thread_keys()
    with torch.inference_mode():
        inside, (include, exclude) = read_thread()
    assert_same_keys(inside["include"], include)
    assert_same_keys(inside["exclude"], exclude)
    assert not include.has(DK.ADInplaceOrView) and "ADInplaceOrView" in outside["include"]
    assert thread_keys() == outside


# --- dispatch tables ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["aten::mm", "aten::add.Tensor", "aten::linear", "aten::view"])
def test_a_row_is_a_kernel_exactly_where_the_dispatcher_has_one(op):
    table = dispatch_table(op)
    assert {"CPU", "Meta", "AutogradCPU", "AutocastCPU"} <= set(table)
    checked = 0
    for key, where in table.items():
        try:
            has = torch._C._dispatch_has_kernel_for_dispatch_key(op, key)
        except RuntimeError:  # a key name the Python binding cannot parse (QuantizedHIP, ...)
            continue
        assert where.endswith("[kernel]") == has, (op, key, where)
        assert "registered at " in where
        checked += 1
    assert checked > 20


def test_autocast_rows_mm_has_a_kernel_add_falls_through():
    mm = dispatch_table("aten::mm", ("AutocastCPU",))["AutocastCPU"]
    add = dispatch_table("aten::add.Tensor", ("AutocastCPU",))["AutocastCPU"]
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::mm", "AutocastCPU")
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aten::add.Tensor", "AutocastCPU")
    assert mm.endswith("[kernel]") and not mm.startswith("fallthrough")
    assert add.startswith("fallthrough") and add.endswith("[backend fallback]")


def test_keys_select_and_order_the_rows():
    full = dispatch_table("aten::mm")
    picked = dispatch_table("aten::mm", ("Meta", "NoSuchKey", "CPU"))
    assert list(picked) == ["Meta", "CPU"]
    assert picked == {"Meta": full["Meta"], "CPU": full["CPU"]}
    assert dispatch_table("aten::mm", ()) == {}


def test_rows_registered_in_this_checkout_are_relative_to_it():
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[2])
    raw = torch._C._dispatch_dump_table("aten::mm")
    meta = dispatch_table("aten::mm", ("Meta",))["Meta"]
    if root + "/" in raw:  # torch installed inside the checkout (.nox/book): its path is shortened
        assert root not in meta and "torch/_meta_registrations.py" in meta
    assert all(root + "/" not in row for row in dispatch_table("aten::mm").values())


# --- the two logging modes ----------------------------------------------------------------------

def test_aten_log_sees_linear_decomposed_and_torch_log_sees_the_call():
    a = torch.randn(4, 3, requires_grad=True)
    w, bias = torch.randn(5, 3), torch.randn(5)
    # linear has no kernel of its own below autograd: it is CompositeImplicitAutograd
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aten::linear", "CompositeImplicitAutograd")
    with TorchLog() as top, AtenLog() as bottom:
        y = F.linear(a, w, bias)
    assert [c for c, _ in bottom.calls] == ["aten.t.default", "aten.addmm.default"]
    assert bottom.calls[1][1] == ("float32", "float32", "float32")
    assert len(top.calls) == 1 and top.calls[0].endswith("linear")
    torch.testing.assert_close(y, a @ w.T + bias)


def test_aten_log_sees_the_dtypes_autocast_chose():
    x, w, target = torch.randn(4, 8), torch.randn(16, 8), torch.randn(4, 16)
    with AtenLog() as log, torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w)
        loss = F.mse_loss(y, target)
    ops = dict(log.calls)
    assert ops["aten.mm.default"] == ("bfloat16", "bfloat16")
    assert y.dtype == torch.bfloat16 and loss.dtype == torch.float32
    assert ops["aten.mse_loss.default"] == ("float32", "float32")
    assert sum(c == "aten._to_copy.default" for c, _ in log.calls) == 3  # x, w down; y back up


def test_the_modes_log_every_call_in_order():
    a, b = torch.randn(3), torch.randn(3)
    with TorchLog() as top, AtenLog() as bottom:
        a + b
        torch.mul(a, b)
        a.sum()
    assert [c for c, _ in bottom.calls] == ["aten.add.Tensor", "aten.mul.Tensor", "aten.sum.default"]
    assert len(top.calls) == 3
    assert [c.rsplit(".", 1)[-1] for c in top.calls] == ["add", "mul", "sum"]
    assert top.calls[1] == f"{torch.mul.__module__}.{torch.mul.__qualname__}"
