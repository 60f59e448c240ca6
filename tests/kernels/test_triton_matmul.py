"""Chapter 3's matmul kernels, run by Triton's interpreter on CPU tensors, against float64."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels.triton_matmul import (  # noqa: E402
    CHECK_TOLERANCE,
    dram_read_model,
    launch_order,
    matmul,
    matmul_errors,
    matmul_flops,
    measure_matmul,
    profile_group_order,
    wave_tiles,
)


def test_every_kernel_type_and_irregular_shape_matches_float64():
    rows = matmul_errors()
    assert {r["kernel"] for r in rows} == {"pointer", "tma"}
    assert {r["dtype"] for r in rows} == set(CHECK_TOLERANCE)
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad
    # the interpreter computes FP32 in FP32: far below the TF32 tolerance a GPU needs
    assert max(r["rel_err"] for r in rows if r["dtype"] == "float32") < 1e-6


def test_any_strides_for_the_pointer_kernel():
    gen = torch.Generator().manual_seed(1)
    a = torch.randn(50, 40, generator=gen)[:, ::2]  # (50, 20), row stride 40, column stride 2
    b = torch.randn(30, 20, generator=gen).T  # (20, 30) column-major
    assert torch.allclose(matmul(a, b), (a.double() @ b.double()).float(), atol=1e-4)


def test_a_fixed_config_and_a_k_multiple_of_block_k():
    gen = torch.Generator().manual_seed(2)
    a, b = torch.randn(64, 64, generator=gen), torch.randn(64, 48, generator=gen)
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 32, "GROUP_M": 2}
    for kernel in ("pointer", "tma"):
        assert torch.allclose(matmul(a, b, kernel=kernel, config=config), a @ b, atol=1e-4)


def test_bad_input_is_refused_in_one_line():
    a = torch.randn(8, 16)
    cases = [
        (dict(a=a, b=torch.randn(15, 8)), "need \\(M, K\\) @ \\(K, N\\)"),
        (dict(a=a, b=torch.randn(16, 8).double()), "operands differ"),
        (dict(a=a.double(), b=torch.randn(16, 8).double()), "dtype torch.float64"),
        (dict(a=a, b=torch.randn(16, 8), kernel="cuda"), "kernel 'cuda'"),
        (dict(a=a.to(torch.float8_e4m3fn), b=torch.randn(16, 8).to(torch.float8_e4m3fn)), "need scale_a"),
        (dict(a=a, b=torch.randn(16, 8), scale_a=torch.tensor(1.0), scale_b=torch.tensor(1.0)),
         "need scale_a"),
        (dict(a=torch.randn(8, 15), b=torch.randn(15, 8), kernel="tma"), "16-byte"),
        (dict(a=torch.randn(16, 8).T, b=torch.randn(16, 8), kernel="tma"), "row-major A"),
        (dict(a=torch.randn(8, 0), b=torch.randn(0, 8)), "must be positive"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError, match=message):
            matmul(**kwargs)


def test_launch_order_goes_down_groups_of_rows_then_across():
    order = launch_order(M=96, N=64, block_m=32, block_n=16, group_m=2)  # 3 x 4 tiles
    assert order[:8] == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2), (0, 3), (1, 3)]
    assert order[8:] == [(2, 0), (2, 1), (2, 2), (2, 3)]  # the last group has one row
    assert sorted(order) == [(m, n) for m in range(3) for n in range(4)]  # every tile once
    assert launch_order(96, 64, 32, 16, 1) == [(m, n) for m in range(3) for n in range(4)]  # row-major
    with pytest.raises(ValueError, match="group_m 0"):
        launch_order(96, 64, 32, 16, 0)


def test_wave_tiles_and_the_dram_model_by_hand():
    order = launch_order(96, 64, 32, 16, 2)
    assert wave_tiles(order, 4)[0] == {"programs": 4, "a_blocks": 2, "b_blocks": 2, "blocks_loaded": 8}
    assert wave_tiles(launch_order(96, 64, 32, 16, 1), 4)[0]["b_blocks"] == 4  # one row of tiles
    # one wave holding every program: each block read once, A and B once in full
    assert dram_read_model(96, 64, 40, 32, 16, 2, wave=12, elem_bytes=2) == (96 * 40 + 40 * 64) * 2
    # waves of one program: no reuse, every program reads its row block and column block
    assert dram_read_model(96, 64, 40, 32, 16, 2, wave=1, elem_bytes=2) == 12 * (32 + 16) * 40 * 2
    with pytest.raises(ValueError, match="wave 0"):
        wave_tiles(order, 0)


def test_flops_and_the_gpu_functions_need_cuda():
    assert matmul_flops(2, 3, 4) == 48
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    for fn in (measure_matmul, profile_group_order):
        with pytest.raises(RuntimeError, match="CUDA"):
            fn()


def _run_cli(*args):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real compiler
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "infralens.kernels.triton_matmul", *args],
                          capture_output=True, text=True, env=env)


def test_offline_compile_shows_warpgroup_mma_on_sm90_and_warp_mma_on_sm80():
    import json

    proc = _run_cli("--arch", "90", "--arch", "80")
    assert proc.returncode == 0, proc.stderr
    sm90, sm80 = (json.loads(line) for line in proc.stdout.splitlines())
    assert sm90["ptx_counts"]["wgmma.mma_async"] > 0 and sm90["ptx_counts"]["mma.sync"] == 0
    assert sm80["ptx_counts"]["mma.sync"] > 0 and sm80["ptx_counts"]["wgmma.mma_async"] == 0
    # the pointer kernel's tiles reach shared memory by cp.async, not through registers
    assert sm90["ptx_counts"]["cp.async.cg"] > 0 and sm90["ptx_counts"]["ld.global"] == 0
    bm, bn, bk, stages, _ = sm90["config"]
    assert sm90["shared_bytes"] >= stages * (bm + bn) * bk * 2  # the pipeline's buffers, BF16
    both = _run_cli("--arch", "90", "--arch", "80", "--kernel", "pointer", "--kernel", "tma")
    assert [(r["kernel"], r["arch"]) for r in map(json.loads, both.stdout.splitlines())] == [
        ("pointer", 90), ("pointer", 80), ("tma", 90)]  # sm_80 has no TMA: that pair is left out
    for bad in (("--arch", "70"), ("--arch", "80", "--kernel", "tma"), ()):
        proc = _run_cli(*bad)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and not proc.stdout, bad
