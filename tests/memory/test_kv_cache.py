"""kv_cache_bytes against the closed form, written out factor by factor."""

from __future__ import annotations

import pytest

from infralens.memory import kv_cache_bytes, kv_cache_bytes_per_token
from infralens.models import shipped_config


def test_llama_3_70b_at_8k_context():
    k_and_v, layers, batch, tokens, kv_heads, head_dim, bf16 = 2, 80, 1, 8192, 8, 128, 2
    expected = k_and_v * layers * batch * tokens * kv_heads * head_dim * bf16
    assert expected == 2_684_354_560  # 2.5 GiB
    assert kv_cache_bytes(shipped_config("llama-3-70b"), batch=1, seq_len=8192) == expected


def test_per_token_gqa_versus_mha():
    # Llama-2-7B: multi-head, 32 KV heads of 128 -> 2 * 32 * 32 * 128 * 2 = 512 KiB per token.
    assert kv_cache_bytes_per_token(shipped_config("llama-2-7b")) == 2 * 32 * 32 * 128 * 2
    # Llama-3-8B: same width and depth, but 8 KV heads -> a quarter of that.
    assert kv_cache_bytes_per_token(shipped_config("llama-3-8b")) == 2 * 32 * 8 * 128 * 2


def test_scales_linearly_with_batch_tokens_and_element_size():
    cfg = shipped_config("mistral-7b-v0.1")
    one = kv_cache_bytes(cfg, 1, 1, bytes_per_elem=1)
    assert one == 2 * 32 * 8 * 128
    assert kv_cache_bytes(cfg, 4, 4096, bytes_per_elem=2) == one * 4 * 4096 * 2


def test_explicit_head_dim_is_used():
    cfg = {"model_type": "mistral", "vocab_size": 10, "hidden_size": 5120,
           "intermediate_size": 14336, "num_hidden_layers": 40, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128}  # Mistral-Nemo shape
    assert kv_cache_bytes(cfg, 1, 1) == 2 * 40 * 8 * 128 * 2


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"batch": 0}, "batch"), ({"seq_len": -1}, "seq_len"), ({"bytes_per_elem": 0},
     "bytes_per_elem"), ({"batch": 1.5}, "batch"), ({"seq_len": True}, "seq_len")],
)
def test_rejects_non_positive_sizes(kwargs, name):
    args = {"batch": 1, "seq_len": 16, "bytes_per_elem": 2} | kwargs
    with pytest.raises(ValueError, match=f"^{name} must be a positive integer") as info:
        kv_cache_bytes(shipped_config("gpt2"), **args)
    assert "\n" not in str(info.value)
