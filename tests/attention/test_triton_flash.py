"""Lab 07's Triton FlashAttention kernel, run by Triton's interpreter on CPU tensors."""

import os
import re

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.attention.reference import naive_attention  # noqa: E402
from infralens.attention.triton_flash import (  # noqa: E402
    GPU_CONFIGS,
    INTERPRETER_CONFIG,
    check_lengths,
    flash_attention,
    kernel_config,
    shared_memory_bytes,
)
from infralens.hardware import CC_LIMITS, KIB  # noqa: E402
from infralens.tools.glue import record  # noqa: E402


def qkv(B, H, S, D, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, H, S, D, generator=g).to(dtype) for _ in range(3)]


def ref(q, k, v, causal):
    return naive_attention(q.double(), k.double(), v.double(), causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("D", [64, 128])
@pytest.mark.parametrize("S", [1, 37, 64])
def test_matches_float64_reference(S, D, causal):
    q, k, v = qkv(1, 2, S, D)
    out = flash_attention(q, k, v, causal=causal)
    assert out.dtype == torch.float32 and out.shape == q.shape
    torch.testing.assert_close(out.double(), ref(q, k, v, causal), rtol=0, atol=2e-6)


@pytest.mark.parametrize("config", [(32, 16, 1, 1), (64, 16, 1, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", [48, 53])  # 48: whole key blocks, a partial query block; 53: both partial
def test_other_block_shapes_and_batches(config, causal, S):
    q, k, v = qkv(2, 3, S, 64, seed=1)
    out = flash_attention(q, k, v, causal=causal, config=config)
    torch.testing.assert_close(out.double(), ref(q, k, v, causal), rtol=0, atol=2e-6)


def test_strided_inputs_and_scale():
    g = torch.Generator().manual_seed(2)
    qkv_bshd = torch.randn(3, 2, 40, 4, 64, generator=g)  # (q/k/v, B, S, H, D) as a QKV matmul makes
    q, k, v = (t.transpose(1, 2) for t in qkv_bshd)  # (B, H, S, D) views, S not innermost-but-one
    assert not q.is_contiguous()
    out = flash_attention(q, k, v, causal=True, scale=0.05)
    want = naive_attention(q.double(), k.double(), v.double(), causal=True, scale=0.05)
    torch.testing.assert_close(out.double(), want, rtol=0, atol=2e-6)


def test_float16():
    q, k, v = qkv(1, 2, 37, 64, dtype=torch.float16)
    out = flash_attention(q, k, v, causal=True)
    assert out.dtype == torch.float16
    torch.testing.assert_close(out.double(), ref(q, k, v, True), rtol=0, atol=3e-3)


def test_rejects_bad_input():
    q, k, v = qkv(1, 1, 16, 64)
    with pytest.raises(ValueError, match="power of two"):
        flash_attention(*qkv(1, 1, 16, 48))
    with pytest.raises(ValueError, match="share one shape"):
        flash_attention(q, k[:, :, :8], v)
    with pytest.raises(ValueError, match="multiple of BLOCK_N"):
        flash_attention(q, k, v, config=(16, 32, 1, 1))
    with pytest.raises(ValueError, match="bfloat16"):
        flash_attention(*qkv(1, 1, 16, 64, dtype=torch.bfloat16))


def test_configs():
    assert kernel_config(64, True, torch.device("cpu")) == INTERPRETER_CONFIG
    assert set(GPU_CONFIGS) == {(d, c) for d in (64, 128) for c in (False, True)}
    assert all(bm % bn == 0 for bm, bn, _, _ in GPU_CONFIGS.values())


def test_offline_compile_shared_memory_rule():
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real compiler
    bm, bn, warps, stages = 128, 64, 8, 3
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m",
                           "infralens.attention.triton_flash", "--head-dim", "128",
                           "--config", f"{bm},{bn},{warps},{stages}"],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    # Q once, then one K block and one V block per pipeline stage, all bf16.
    assert res["shared_bytes"] == bm * 128 * 2 + stages * 2 * bn * 128 * 2
    assert shared_memory_bytes((bm, bn, warps, stages), 128) == res["shared_bytes"]
    assert res["wgmma"] > 0 and res["cp_async"] > 0 and res["scalar_b16_loads"] == 0
    for args in (("--config", "128,64"), ("--head-dim", "7")):  # ours, then argparse's
        bad = subprocess.run([sys.executable, "-m", "infralens.attention.triton_flash", *args],
                             capture_output=True, text=True, env=env)
        assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, args


def test_shared_memory_rule_by_hand():
    # (128, 128, 8, 3) at D = 128: a 32 KiB query block and 3 x (32 + 32) KiB of K and V blocks.
    assert shared_memory_bytes((128, 128, 8, 3), 128) == 32 * KIB + 3 * 64 * KIB == 224 * KIB
    assert shared_memory_bytes((128, 64, 4, 2), 64) == 16 * KIB + 2 * 2 * 8 * KIB
    assert shared_memory_bytes((128, 128, 4, 3), 64, elem_bytes=4) == 2 * shared_memory_bytes(
        (128, 128, 4, 3), 64)  # fp32 blocks take twice the bytes
    assert shared_memory_bytes((64, 64, 4, 2), 128) == shared_memory_bytes((64, 64, 8, 2), 128)  # warps: no


def test_tuned_configs_fit_an_h100_block():
    # Triton refuses a kernel above the per-block opt-in maximum, 227 KiB on CC 9.0.
    limit = CC_LIMITS[(9, 0)].smem_per_block_max_bytes.value
    assert limit == 227 * KIB
    for (head_dim, _), config in GPU_CONFIGS.items():
        assert shared_memory_bytes(config, head_dim) <= limit, config


def test_shared_memory_rule_is_what_triton_compiled_on_an_h100():
    # Lab 07's record: the shared memory of each configuration as Triton compiled it for the H100,
    # or, for one that does not fit, what Triton said it required against the hardware limit.
    rows = record("lab07-attention").results["device_resources_d128"]
    limit = CC_LIMITS[(9, 0)].smem_per_block_max_bytes.value
    compiled = refused = 0
    for row in rows:
        config = tuple(row["config"])
        if "error" in row:
            required = re.search(r"Required: (\d+), Hardware limit: (\d+)", row["error"])
            assert required, row["error"]
            assert int(required.group(1)) == shared_memory_bytes(config, row["head_dim"]) > limit
            assert int(required.group(2)) == limit
            refused += 1
        else:
            assert row["shared_bytes"] == shared_memory_bytes(config, row["head_dim"]), config
            compiled += 1
    assert compiled >= 1  # the record is not empty (a refused configuration is checked when there is one)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_check_lengths_needs_a_gpu():
    with pytest.raises(RuntimeError, match="CUDA"):
        check_lengths([17])


@pytest.mark.parametrize("config, words", [
    ((48, 64, 4, 2), "BLOCK_M 48: must be a power of two from 16"),
    ((64, 8, 4, 2), "BLOCK_N 8: must be a power of two from 16"),
    ((64, 128, 4, 2), "multiple of BLOCK_N"),
    ((64, 64, 3, 2), "num_warps 3"),
    ((64, 64, 4, 0), "num_stages 0"),
    ((1024, 1024, 4, 2), "BLOCK_M x BLOCK_N scores hold 1,048,576 fp32 values"),
    ((1024, 16, 4, 1), "BLOCK_M x D accumulator"),
    ((64, 64, 4), "got 3 numbers"),
])
def test_check_config_refuses_before_compiling(config, words):
    from infralens.attention.triton_flash import check_config

    with pytest.raises(ValueError, match=re.escape(words)):
        check_config(config, 128)


def test_check_config_takes_every_tuned_config_and_one_above_shared_memory():
    from infralens.attention.triton_flash import check_config

    for (head_dim, _), config in GPU_CONFIGS.items():
        check_config(config, head_dim)
    check_config((*INTERPRETER_CONFIG,), 64)
    # Too much shared memory compiles (Triton refuses it only when loading): Lab 07 shows one.
    too_much = (128, 128, 8, 4)
    assert shared_memory_bytes(too_much, 128) > CC_LIMITS[(9, 0)].smem_per_block_max_bytes.value
    check_config(too_much, 128)
