"""The C++ operator: built once for the module, checked against float64 arithmetic, its dispatch
table against the source file, and its Python registrations against autograd and opcheck.

Registering a fake kernel and a backward is process-wide and permanent, so the behaviour *before*
those registrations is checked in a fresh interpreter (reusing this module's build folder), and
the registrations here are made once, only where nothing registered them already (the page does).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from infralens.dispatch import extension
from infralens.dispatch.keys import dispatch_table
from tests.tensors import seeded_randn

OP = "infralens::scaled_add"
rand = seeded_randn(4)


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("scaled_add_build")


@pytest.fixture(scope="module")
def scaled_add(build_dir):
    return extension.load_scaled_add(build_dir)


@pytest.fixture(scope="module")
def registered(scaled_add):
    """The operator with its fake kernel and backward registered (once per process)."""
    if not torch._C._dispatch_has_kernel_for_dispatch_key(OP, "Meta"):
        torch.library.register_fake(OP, extension.scaled_add_fake)
    if not torch._C._dispatch_has_kernel_for_dispatch_key(OP, "Autograd"):
        torch.library.register_autograd(OP, extension.scaled_add_backward,
                                        setup_context=extension.scaled_add_setup_context)
    return scaled_add


def assert_float32_close(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, alpha: float) -> None:
    """``out`` is a + alpha*b of float32 inputs up to float32 rounding: alpha, the product and the
    sum are each rounded once (unit roundoff u = 2**-24), so |error| <= u(|a| + 3|alpha b|); the
    bound allows twice that."""
    a64, b64 = a.double(), b.double()
    assert out.dtype == torch.float32 and out.shape == a.shape
    err = (out.double() - (a64 + alpha * b64)).abs()
    assert (err <= 2 * 2 ** -24 * (a64.abs() + 3 * (alpha * b64).abs())).all(), err.max()


@pytest.mark.parametrize("alpha", [0.5, -2.25, 0.0, 1e-3, 1 / 3])
def test_scaled_add_is_a_plus_alpha_b(scaled_add, alpha):
    a, b = rand(5, 7).float(), rand(5, 7).float()
    assert_float32_close(scaled_add(a, b, alpha), a, b, alpha)
    assert torch.equal(scaled_add(a, b, 0.0), a)


def test_non_contiguous_inputs_are_read_through_their_strides(scaled_add):
    a, b = rand(6, 4).float().t(), rand(4, 12).float()[:, ::2]
    assert not a.is_contiguous() and not b.is_contiguous()
    assert_float32_close(scaled_add(a, b, 3.0), a, b, 3.0)


def test_bad_inputs_are_refused_by_the_kernel(scaled_add):
    with pytest.raises(RuntimeError, match="same shape"):
        scaled_add(torch.ones(3), torch.ones(4), 1.0)
    with pytest.raises(RuntimeError, match="same shape"):
        scaled_add(torch.ones(2, 3), torch.ones(3, 2), 1.0)
    with pytest.raises(RuntimeError, match="float32 only"):
        scaled_add(torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), 1.0)


def test_schema_and_cpu_row_come_from_the_source_file(scaled_add):
    text = extension.SOURCE.read_text()
    declared = re.search(r'm\.def\("([^"]+)"\)', text).group(1)
    assert str(scaled_add.default._schema) == f"infralens::{declared}"
    lines = text.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("TORCH_LIBRARY_IMPL(infralens, CPU"))
    assert dispatch_table(OP, ("CPU",)) == {
        "CPU": f"registered at src/infralens/dispatch/scaled_add.cpp:{line} [kernel]"}
    assert torch._C._dispatch_has_kernel_for_dispatch_key(OP, "CPU")


def test_a_second_load_reuses_the_registered_operator(scaled_add, tmp_path):
    again = extension.load_scaled_add(tmp_path / "never_built")
    assert again is scaled_add
    assert not (tmp_path / "never_built").exists()


BEFORE_REGISTRATION = textwrap.dedent("""
    import json, sys, warnings
    import torch
    from infralens.dispatch.extension import load_scaled_add
    from infralens.dispatch.keys import dispatch_table

    op = load_scaled_add(sys.argv[1])
    OP = "infralens::scaled_add"
    out = {"meta_kernel": torch._C._dispatch_has_kernel_for_dispatch_key(OP, "Meta"),
           "autograd_row": dispatch_table(OP, ("AutogradCPU",))["AutogradCPU"]}
    try:
        op(torch.ones(4, device="meta"), torch.ones(4, device="meta"), 0.5)
        out["meta_call"] = "ran"
    except NotImplementedError:
        out["meta_call"] = "NotImplementedError"
    p, q = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = op(p, q, 2.0)
        y.sum().backward()
    out.update(requires_grad=y.requires_grad, warnings=[str(w.message) for w in caught],
               p_grad=p.grad is None, q_grad=q.grad is None)
    print(json.dumps(out))
""")


def test_without_python_registrations_meta_fails_and_backward_gives_no_gradient(scaled_add, build_dir):
    done = subprocess.run([sys.executable, "-c", BEFORE_REGISTRATION, str(build_dir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["meta_kernel"] is False and out["meta_call"] == "NotImplementedError"
    assert "VariableFallbackKernel.cpp" in out["autograd_row"]
    assert out["autograd_row"].endswith("[backend fallback]")
    assert out["requires_grad"] is True  # the fallback links the output to the inputs...
    assert any("autograd kernel was not registered" in w for w in out["warnings"]), out["warnings"]
    assert out["p_grad"] and out["q_grad"]  # ...but delivers no gradient


def test_fake_kernel_gives_shape_dtype_device_only(registered):
    out = registered(torch.ones(2, 8, device="meta"), torch.ones(2, 8, device="meta"), 0.5)
    assert out.shape == (2, 8) and out.device.type == "meta" and out.dtype == torch.float32
    with pytest.raises(RuntimeError, match="same shape"):
        registered(torch.ones(2, 8, device="meta"), torch.ones(8, 2, device="meta"), 0.5)
    assert dispatch_table(OP, ("Meta",))["Meta"].endswith("[kernel]")
    assert dispatch_table(OP, ("AutogradCPU",))["AutogradCPU"].endswith("[autograd kernel]")


@pytest.mark.parametrize("alpha", [2.0, -0.75])
def test_gradient_is_one_for_a_and_alpha_for_b(registered, alpha):
    a = rand(3, 4).float().requires_grad_()
    b = rand(3, 4).float().requires_grad_()
    weights = rand(3, 4).float()  # L = sum(w * out): dL/da = w, dL/db = alpha * w
    (registered(a, b, alpha) * weights).sum().backward()
    torch.testing.assert_close(a.grad, weights, rtol=0, atol=0)
    torch.testing.assert_close(b.grad.double(), alpha * weights.double(), rtol=1e-7, atol=0)


def test_opcheck_passes_once_registered(registered):
    checks = torch.library.opcheck(registered, (torch.randn(3, 4, requires_grad=True),
                                                torch.randn(3, 4, requires_grad=True), 0.5))
    assert checks and set(checks.values()) == {"SUCCESS"}
    assert {"test_schema", "test_autograd_registration", "test_faketensor"} <= set(checks)


def test_fake_and_real_outputs_agree_on_transposed_inputs(registered):
    a, b = torch.randn(3, 4).t(), torch.randn(3, 4).t()
    real = registered(a, b, 0.5)
    fake = registered(a.to("meta"), b.to("meta"), 0.5)
    assert real.is_contiguous() and (fake.shape, fake.stride()) == (real.shape, real.stride())
    checks = torch.library.opcheck(registered, (a.requires_grad_(), b.requires_grad_(), 0.5))
    assert set(checks.values()) == {"SUCCESS"}
