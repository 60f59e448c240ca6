"""The first Triton kernel, interpreted on CPU tensors, and its compiler stages (real compiler)."""

import json
import os
import subprocess
import sys

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels.vector_add import add  # noqa: E402


@pytest.mark.parametrize("n", [1, 1023, 1024, 1025, 5000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_add_matches_torch_at_every_block_edge(n, dtype):
    x = (torch.randn(n) * 100).to(dtype)
    y = (torch.randn(n) * 100).to(dtype)
    assert torch.equal(add(x, y), x + y)  # one rounding per element, as torch's add


def test_block_size_and_a_two_dimensional_tensor():
    x, y = torch.randn(33, 7), torch.randn(33, 7)
    assert torch.equal(add(x, y, block=64), x + y)


def test_bad_input_is_refused():
    x = torch.randn(10)
    with pytest.raises(ValueError, match="differ"):
        add(x, torch.randn(11))
    with pytest.raises(ValueError, match="contiguous"):
        add(torch.randn(4, 4).T, torch.randn(4, 4))
    with pytest.raises(ValueError, match="BLOCK 100"):
        add(x, x, block=100)


def _run_cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real compiler
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "infralens.kernels.vector_add", *args],
                          capture_output=True, text=True, env=env)


def test_every_stage_and_what_n_divisible_by_16_buys():
    aligned, unaligned = map(json.loads, _run_cli("--block", "1024").stdout.splitlines())
    assert aligned["aligned_n"] and not unaligned["aligned_n"]
    for key in ("ttir", "ttgir", "llir", "ptx", "sass"):
        assert aligned[key] and unaligned[key]
    assert "tt.load" in aligned["ttir"] and "#ttg.blocked" in aligned["ttgir"]
    assert "ld.global" in aligned["ptx"] and "LDG" in aligned["sass"]
    # n a multiple of 16: whole 16-byte vectors are in bounds or out, so loads are 128-bit
    assert "ld.global.v4" in aligned["ptx"] and "LDG.E.128" in aligned["sass"]
    assert "ld.global.v4" not in unaligned["ptx"] and "LDG.E.128" not in unaligned["sass"]
    proc = _run_cli("--block", "1000")
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and not proc.stdout
