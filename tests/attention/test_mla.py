"""Multi-head latent attention: cache sizes against the DeepSeek-V2 paper, absorption exact."""

import pytest
import torch

from infralens.attention.mla import (
    DEEPSEEK_CONFIGS,
    mha_cache_elements_per_token,
    mla_attention,
    mla_cache_elements_per_token,
    mla_decode_flops_per_cached_token,
    mla_shape,
)


def test_deepseek_v2_cache_is_the_papers_four_and_a_half_head_dims_per_layer():
    # DeepSeek-V2, section 2.1.4 and Table 1: d_c = 4 d_h, d_r = d_h / 2, so the cache per token is
    # (d_c + d_r) l = 9/2 d_h l, the size of GQA with 2.25 groups.
    s = mla_shape(DEEPSEEK_CONFIGS["deepseek-v2"])
    d_h = s.qk_nope_head_dim
    assert s.kv_lora_rank == 4 * d_h and 2 * s.qk_rope_head_dim == d_h
    assert 2 * mla_cache_elements_per_token(s) == 9 * d_h * s.n_layers
    assert mla_cache_elements_per_token(s) == 2 * 2.25 * d_h * s.n_layers
    # As MHA, the same heads would cache K (d_n + d_r) and V (d_v) per head and layer.
    assert mha_cache_elements_per_token(s) == s.n_layers * s.n_heads * (128 + 64 + 128)


def test_decode_flops_per_cached_token():
    s = mla_shape(DEEPSEEK_CONFIGS["deepseek-v3"])
    assert mla_decode_flops_per_cached_token(s) == 128 * (2 * (512 + 64) + 2 * 512)


@pytest.mark.parametrize("T", [1, 9])
def test_absorbed_decoding_equals_decompressed(T):
    g = torch.Generator().manual_seed(0)
    h, d_n, d_r, d_c, d_v = 4, 8, 4, 16, 6

    def r(*shape):
        return torch.randn(*shape, generator=g, dtype=torch.float64)

    args = (r(h, d_n), r(h, d_r), r(T, d_c), r(T, d_r), r(h, d_n, d_c), r(h, d_v, d_c))
    absorbed, plain = mla_attention(*args, absorb=True), mla_attention(*args, absorb=False)
    assert absorbed.shape == (h, d_v)
    assert (absorbed - plain).abs().max() < 1e-12
