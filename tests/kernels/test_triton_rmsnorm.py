"""Chapter 3's RMSNorm kernels and operators, run by Triton's interpreter, against float64."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels.triton_rmsnorm import (  # noqa: E402
    BWD_STAGES,
    bwd_programs,
    bwd_stages,
    measure_rmsnorm,
    rms_norm,
    rms_norm_eager,
    rms_norm_fwd,
    rmsnorm_bytes,
    rmsnorm_errors,
)


def test_forward_and_backward_match_float64_at_irregular_shapes():
    rows = rmsnorm_errors()
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad
    # FP32 storage: the kernels compute in FP32, so the errors are FP32 rounding, not more
    assert max(max(r["y"], r["dx"], r["dw"]) for r in rows if r["dtype"] == "float32") < 1e-5


def test_eager_reference_against_the_textbook_formula():
    x = torch.randn(5, 12, dtype=torch.float64)
    w = torch.randn(12, dtype=torch.float64)
    expected = x / torch.sqrt((x * x).sum(-1, keepdim=True) / 12 + 1e-6) * w
    assert torch.allclose(rms_norm_eager(x, w), expected, rtol=1e-12, atol=0)


def test_backward_grid_has_a_partial_dw_row_per_program():
    x = torch.randn(3, 2, 40)  # three dimensions: rows are the product of the leading ones
    w = torch.randn(40, requires_grad=True)
    x.requires_grad_()
    y = rms_norm(x, w)
    assert y.shape == x.shape
    dx, dw = torch.autograd.grad(y.sum(), (x, w))
    xr, wr = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    ref_dx, ref_dw = torch.autograd.grad(rms_norm_eager(xr, wr).sum(), (xr, wr))
    assert torch.allclose(dx.double(), ref_dx, atol=1e-5) and torch.allclose(dw.double(), ref_dw, atol=1e-5)
    assert bwd_programs(6, torch.device("cpu")) == 6  # fewer rows than programs: one per row
    assert bwd_programs(10_000, torch.device("cpu"), per_sm=3) == 12  # the CPU counts 4 "SMs"
    cpu = torch.device("cpu")  # shared memory of an sm_90 program: two rows of x and dy prefetched
    assert bwd_stages(8192, 2, cpu) == BWD_STAGES and bwd_stages(16384, 4, cpu) == 1


def test_operator_passes_opcheck_and_compiles_in_one_graph():
    x, w = torch.randn(6, 48), torch.randn(48)
    torch.library.opcheck(rms_norm_fwd, (x, w, 1e-6))
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b: torch.relu(rms_norm(a, b)) * 2, fullgraph=True)
    assert torch.allclose(compiled(x, w), torch.relu(rms_norm_eager(x, w)) * 2, atol=1e-5)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="weight must be"):
        rms_norm(torch.randn(4, 8), torch.randn(7))
    with pytest.raises(ValueError, match="weight must be"):
        rms_norm(torch.randn(4, 8), torch.randn(8, 1))
    with pytest.raises(ValueError, match="one row must fit one block"):
        rms_norm(torch.randn(1, 2**21), torch.randn(2**21))


def test_byte_accounting():
    b = rmsnorm_bytes(M=10, N=8, elem_bytes=2, programs=3)
    assert b["fwd"] == 2 * 10 * 8 * 2 + 8 * 2 + 4 * 10  # x in, y out, w, rstd
    assert b["bwd"] == 3 * 10 * 8 * 2 + 8 * 2 + 4 * 10 + 2 * 3 * 8 * 4 + 8 * 2  # + partial dw out and in, dw
    assert b["fwd_bwd"] == b["fwd"] + b["bwd"] and b["copy_of_x"] == 2 * 10 * 8 * 2


def test_measure_needs_cuda():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        measure_rmsnorm()


def test_eager_traffic_is_the_operators_eager_runs():
    from infralens.kernels.triton_rmsnorm import eager_rmsnorm_traffic, rms_norm_eager
    from tests.tensors import aten_traffic

    M, N = 6, 8
    rows = aten_traffic(rms_norm_eager, torch.randn(M, N).bfloat16(), torch.randn(N).bfloat16())
    model = eager_rmsnorm_traffic(M, N, 2)
    assert [(r["read"], r["write"]) for r in model] == [(rd, wr) for _, rd, wr in rows]
    assert len(model) == 9  # nine kernels where the fused forward is one
