"""The W4A16 kernels in Triton's interpreter (FP16: the interpreter's tl.dot mishandles BF16) at
irregular sizes, against a float64 product of the unpacked weights; the packing against the
affine quantizer and the byte count against effective_bits."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.kernels.w4a16 import (  # noqa: E402
    _split_k,
    pack_w4,
    unpack_w4,
    w4_weight_bytes,
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


@pytest.mark.parametrize("m,gemv", [(1, True), (1, False), (3, True), (17, False)])
@pytest.mark.parametrize("split_k", [1, 2])
def test_kernel_matches_the_float64_reference(m, gemv, split_k):
    torch.manual_seed(m)
    k, n = 256, 80                                   # N is not a multiple of the block
    packed, scales = pack_w4(torch.randn(k, n), 128, torch.float16)
    x = torch.randn(m, k).half()
    y = w4a16_matmul(x, packed, scales, block_n=32, block_k=64, split_k=split_k, gemv=gemv)
    ref = w4a16_reference(x, packed, scales)
    assert y.shape == (m, n) and y.dtype == torch.float16
    assert ((y.double() - ref).abs().max() / ref.abs().max()).item() < 2e-3


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
