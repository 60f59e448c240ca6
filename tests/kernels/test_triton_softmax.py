"""Lab 06's softmax kernels, run by Triton's interpreter on CPU tensors, against float64."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels.triton_softmax import (  # noqa: E402
    expected_speedup,
    measure_num_warps,
    measure_softmax,
    naive_softmax,
    ptx_op_counts,
    row_num_warps,
    softmax,
    softmax_bytes,
    softmax_online,
    softmax_persistent,
)

KERNELS = {
    "row": softmax,
    "online-128": lambda x: softmax_online(x, block_n=128),  # 781 = 6 full blocks + 1 partial
    "online-default": softmax_online,
    "persistent": softmax_persistent,  # 4 programs loop over the rows
}


def reference(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.double(), dim=1)


@pytest.mark.parametrize("name", KERNELS)
def test_irregular_shape_matches_float64(name):
    torch.manual_seed(0)
    x = 3 * torch.randn(37, 781)
    y = KERNELS[name](x)
    assert y.dtype == x.dtype and y.shape == x.shape
    torch.testing.assert_close(y.double(), reference(x), rtol=0, atol=1e-6)


def test_naive_matches_float64():
    x = torch.randn(37, 781)
    torch.testing.assert_close(naive_softmax(x).double(), reference(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_16_bit_storage_fp32_math(name, dtype):
    torch.manual_seed(1)
    x = torch.randn(19, 300).to(dtype)
    y = KERNELS[name](x)
    assert y.dtype == dtype
    # One rounding of an fp32 result: within a unit in the last place of the 16-bit type.
    ulp = torch.finfo(dtype).eps
    torch.testing.assert_close(y.double(), reference(x), rtol=ulp, atol=1e-7)


@pytest.mark.parametrize("name", KERNELS)
@pytest.mark.parametrize("n_cols", [1, 2, 127, 128, 129, 1000])
def test_widths_around_the_block_edges(name, n_cols):
    x = torch.randn(5, n_cols)
    torch.testing.assert_close(KERNELS[name](x).double(), reference(x), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", KERNELS)
def test_large_logits_and_minus_infinity(name):
    x = torch.randn(4, 200) * 1e4  # exp would overflow without subtracting the max
    x[1, 50:] = -float("inf")  # a partly masked row (as causal attention makes them)
    y = KERNELS[name](x)
    assert torch.isfinite(y).all()
    torch.testing.assert_close(y.double(), reference(x), rtol=0, atol=1e-6)
    assert (y[1, 50:] == 0).all()


@pytest.mark.parametrize("name", KERNELS)
def test_row_stride_is_honoured(name):
    wide = torch.randn(7, 1024)
    x = wide[:, 3:3 + 500]  # rows 1024 apart, not 500
    assert not x.is_contiguous()
    torch.testing.assert_close(KERNELS[name](x).double(), reference(x), rtol=0, atol=1e-6)


def test_bad_input_is_rejected_and_empty_is_fine():
    with pytest.raises(ValueError, match="2-D"):
        softmax(torch.randn(3, 4, 5))
    with pytest.raises(ValueError, match="contiguous"):
        softmax(torch.randn(8, 6).t())
    assert softmax(torch.empty(0, 10)).shape == (0, 10)


def test_byte_accounting():
    counts = softmax_bytes(1823, 781, 4)
    assert counts["fused"] == 2 * 1823 * 781 * 4
    assert counts["naive"] == (8 * 1823 * 781 + 4 * 1823) * 4
    assert expected_speedup(781) == pytest.approx(4 + 2 / 781)


def test_launch_heuristics():
    warps = [row_num_warps(2**k, e) for k in range(0, 17) for e in (2, 4)]
    assert all(w in (1, 2, 4, 8, 16, 32) for w in warps)
    assert row_num_warps(32768, 4) == 32 and row_num_warps(256, 4) == 1
    assert row_num_warps(1024, 4) == 4  # 4 KiB / 32 B per thread = 128 threads


@pytest.mark.parametrize("warps", [1, 2, 8])
def test_row_kernel_with_any_num_warps_matches_float64(warps):
    # The scan of Lab 06 launches the row kernel with counts row_num_warps would not pick.
    x = 3 * torch.randn(9, 781)
    torch.testing.assert_close(softmax(x, num_warps=warps).double(), reference(x), rtol=0, atol=1e-6)


def test_ptx_op_counts_reads_opcodes_and_skips_directives_and_guards():
    ptx = """.visible .entry k(
	.param .u64 k_param_0
)
{
	.reg .f32 	%f<4>;
	mul.f32 	%f2, %f1, 0f3FB8AA3B;
	ex2.approx.f32 	%f3, %f2;
	@%p1 st.global.v4.b32 	[%rd1], {%r1, %r2, %r3, %r4};
	@!%p2 bra 	$L__BB0_2;
	// ex2.approx.f32 in a comment
	ret;
}"""
    assert ptx_op_counts(ptx) == {"bra": 1, "ex2.approx.f32": 1, "mul.f32": 1, "ret": 1,
                                  "st.global.v4.b32": 1}


def test_measure_needs_cuda():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        measure_softmax([256], [torch.float32])
    with pytest.raises(RuntimeError, match="CUDA"):
        measure_num_warps([256], [torch.float32], [1, 2])


def _run_cli(*args):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real compiler
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "infralens.kernels.triton_softmax",
                           *args], capture_output=True, text=True, env=env)


def test_offline_compile_reports_registers():
    import json

    proc = _run_cli("--dtype", "fp32", "--block", "1024")
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert res["block_n"] == 1024 and res["num_warps"] == row_num_warps(1024, 4)
    assert 0 < res["registers"] <= 255 and res["vector_loads"] > 0  # 16-byte loads, no scalar ones
    # tl.exp is 2**(x * log2(e)): one ex2.approx per element (8 per thread: 1,024 over 128 threads)
    per_thread = 1024 // (res["num_warps"] * 32)
    exp2 = {op: n for op, n in res["ptx_ops"].items() if op.startswith("ex2.approx")}
    assert sum(exp2.values()) == per_thread, exp2
    assert not any(op.startswith(("ex2.f32", "ex.")) for op in res["ptx_ops"])


def test_offline_compile_rejects_bad_input_and_the_interpreter():
    from infralens.kernels.triton_softmax import row_kernel_resources

    for bad in (("--block", "1000"), ("--block", "abc"), ("--dtype", "fp64")):  # ours, then argparse's
        proc = _run_cli(*bad)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and not proc.stdout, bad
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        row_kernel_resources(1024)  # this process runs the interpreter
