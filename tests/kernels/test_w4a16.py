"""The W4A16 kernels in Triton's interpreter at irregular sizes, against a float64 product of the
unpacked weights: the Tensor-Core kernel in FP16 (the interpreter's tl.dot mishandles BF16), the
single-launch GEMV in BF16 to within one BF16 step of the exact result, its workspace left zeroed;
the packing against the affine quantizer and the byte count against effective_bits."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels import w4a16 as W4  # noqa: E402
from infralens.kernels.w4a16 import (  # noqa: E402
    _split_k,
    gemv_configs,
    pack_w4,
    unpack_w4,
    w4_weight_bytes,
    w4a16_gemv,
    w4a16_matmul,
    w4a16_reference,
)
from infralens.quant import effective_bits  # noqa: E402
from infralens.quant.affine import fake_quantize  # noqa: E402


def test_pack_unpack_is_the_group_quantizer():
    torch.manual_seed(0)
    w = torch.randn(256, 40)
    packed, scales = pack_w4(w, 64, torch.float32)
    assert packed.dtype == torch.int32 and packed.shape == (32, 40) and scales.shape == (4, 40)
    want = fake_quantize(w.T.double(), 4, "group", 64).T
    torch.testing.assert_close(unpack_w4(packed, scales).double(), want, rtol=1e-6, atol=1e-6)
    # the top nibble can set the sign bit of the word: codes 8..15 at bits 28..31 round-trip
    assert (packed < 0).any()


@pytest.mark.parametrize("m", [1, 3, 17])
@pytest.mark.parametrize("split_k", [1, 2])
def test_tensor_core_kernel_matches_the_float64_reference(m, split_k):
    torch.manual_seed(m)
    k, n = 256, 80                                   # N is not a multiple of the block
    packed, scales = pack_w4(torch.randn(k, n), 128, torch.float16)
    x = torch.randn(m, k).half()                     # FP16 rows never take the GEMV
    y = w4a16_matmul(x, packed, scales, config={"block_n": 32, "block_k": 64, "split_k": split_k})
    ref = w4a16_reference(x, packed, scales)
    assert y.shape == (m, n) and y.dtype == torch.float16
    assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3


def _bf16_steps(y: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest distance between y and ref in units of BF16's spacing at ref."""
    spacing = torch.finfo(torch.bfloat16).eps * 2.0 ** torch.floor(torch.log2(ref.abs().clamp(
        min=torch.finfo(torch.bfloat16).tiny)))
    return float(((y.double() - ref) / spacing).abs().max())


@pytest.mark.parametrize("k,n,cfg", [
    (512, 96, {"bn": 64, "bkw": 4, "num_warps": 4, "evict": True, "split": 3}),     # 3 runs of K
    (256, 80, {"bn": 32, "bkw": 16, "num_warps": 4, "evict": False, "split": 1}),   # one run per column
    (1024, 200, {"bn": 128, "bkw": 2, "num_warps": 4, "evict": False, "split": 7}),  # N not a multiple of bn
])
def test_gemv_is_within_one_bf16_step_and_leaves_its_workspace_zeroed(k, n, cfg):
    gen = torch.Generator().manual_seed(k + n)
    packed, scales = pack_w4(torch.randn(k, n, generator=gen) / k**0.5, 128)
    for _ in range(2):                                # the second call reuses the workspace
        x = torch.randn(1, k, generator=gen).bfloat16()
        y = w4a16_gemv(x, packed, scales, cfg)
        ref = w4a16_reference(x, packed, scales)
        assert y.shape == (1, n) and y.dtype == torch.bfloat16
        assert _bf16_steps(y, ref) <= 1.0             # the FP32 sum, rounded once to BF16
    for ws, count in W4._WORKSPACES.values():
        assert not ws.any() and not count.any()


def test_gemv_routing_and_its_configurations():
    packed, scales = pack_w4(torch.randn(256, 64), 128)
    x = torch.randn(1, 256).bfloat16()
    torch.testing.assert_close(w4a16_matmul(x, packed, scales, config=gemv_configs(256, 64)[0]),
                               w4a16_gemv(x, packed, scales, gemv_configs(256, 64)[0]))
    configs = gemv_configs(4096, 14336)
    assert len(configs) == len(W4.GEMV_TILES) * len(W4.GEMV_PROGRAMS) * 2
    for c in configs:                               # the program count each split aims at
        programs = -(-14336 // c["bn"]) * c["split"]
        assert min(abs(programs - p) for p in W4.GEMV_PROGRAMS) <= -(-14336 // c["bn"]) / 2
    with pytest.raises(ValueError, match="must not cross a group"):
        w4a16_gemv(x, packed, pack_w4(torch.randn(256, 64), 16)[1],
                   {"bn": 64, "bkw": 4, "num_warps": 4, "evict": False, "split": 1})
    with pytest.raises(ValueError, match="shapes disagree"):
        w4a16_gemv(torch.randn(1, 128).bfloat16(), packed, scales)


def test_bytes_agree_with_effective_bits():
    k, n, g = 4096, 14336, 128
    assert w4_weight_bytes(k, n, g) * 8 / (k * n) == effective_bits(4, g)


def test_split_heuristic_and_bad_shapes():
    assert _split_k(n=14336, k=4096, block_n=64, block_k=128, group=128, target_programs=264) == 2
    assert _split_k(n=4096, k=14336, block_n=64, block_k=128, group=128, target_programs=264) == 8
    packed, scales = pack_w4(torch.randn(128, 16), 128, torch.float16)
    with pytest.raises(ValueError, match="shapes disagree"):
        w4a16_matmul(torch.randn(1, 64).half(), packed, scales)
    with pytest.raises(ValueError, match="multiple of 8"):
        pack_w4(torch.randn(100, 16), 128)
