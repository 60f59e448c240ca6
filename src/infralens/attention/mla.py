"""Multi-head latent attention (MLA, DeepSeek-V2): a KV cache of one compressed vector per token.

Each token caches a latent c (``kv_lora_rank`` numbers) from which every head's key and value are
decompressed (K_i = W_UK,i c, V_i = W_UV,i c), plus one small RoPE key shared by all heads
(``qk_rope_head_dim``): the position part is kept out of the latent so that the decompression
matrices can be folded into the query and the output projection ("absorbed"). Then a decoding
step never decompresses anything: each head's query is moved into the latent space, attends to
the cached latents directly, and the weighted latent is decompressed once. That makes a decoding
step look like multi-query attention with one shared "KV head" of width
``kv_lora_rank + qk_rope_head_dim`` read by all ``n_heads`` query heads.

The configs are DeepSeek's own inference configs (``DEEPSEEK_CONFIGS``); shapes, for one
sequence and one layer: h heads, T cached tokens, d_c latent, d_r RoPE part, d_n the rest of a
query/key head, d_v a value head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["DEEPSEEK_CONFIGS", "MLAShape", "mla_shape", "mla_cache_elements_per_token",
           "mha_cache_elements_per_token", "mla_decode_flops_per_cached_token", "mla_attention"]

#: DeepSeek's inference configs, field for field as published in github.com/deepseek-ai/DeepSeek-V3,
#: inference/configs/config_236B.json (DeepSeek-V2) and config_671B.json (DeepSeek-V3), commit 9b4e978.
DEEPSEEK_CONFIGS: dict[str, dict] = {
    "deepseek-v2": {
        "vocab_size": 102400, "dim": 5120, "inter_dim": 12288, "moe_inter_dim": 1536,
        "n_layers": 60, "n_dense_layers": 1, "n_heads": 128, "n_routed_experts": 160,
        "n_shared_experts": 2, "n_activated_experts": 6, "n_expert_groups": 8,
        "n_limited_groups": 3, "route_scale": 16.0, "q_lora_rank": 1536, "kv_lora_rank": 512,
        "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    },
    "deepseek-v3": {
        "vocab_size": 129280, "dim": 7168, "inter_dim": 18432, "moe_inter_dim": 2048,
        "n_layers": 61, "n_dense_layers": 3, "n_heads": 128, "n_routed_experts": 256,
        "n_shared_experts": 1, "n_activated_experts": 8, "n_expert_groups": 8,
        "n_limited_groups": 4, "route_scale": 2.5, "score_func": "sigmoid", "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
        "dtype": "fp8",
    },
}


@dataclass(frozen=True)
class MLAShape:
    """The attention shape of an MLA model, read from its config."""

    n_layers: int
    n_heads: int
    kv_lora_rank: int  # d_c: the cached latent
    qk_rope_head_dim: int  # d_r: the cached RoPE key, shared by all heads
    qk_nope_head_dim: int  # d_n: the part of a query/key head decompressed from the latent
    v_head_dim: int  # d_v


def mla_shape(config: dict) -> MLAShape:
    """The :class:`MLAShape` of a DeepSeek inference config (``DEEPSEEK_CONFIGS[name]``)."""
    return MLAShape(config["n_layers"], config["n_heads"], config["kv_lora_rank"],
                    config["qk_rope_head_dim"], config["qk_nope_head_dim"], config["v_head_dim"])


# [attention:mla-cache]
def mla_cache_elements_per_token(shape: MLAShape) -> int:
    """Cached numbers per token over all layers: one latent and one RoPE key per layer."""
    return shape.n_layers * (shape.kv_lora_rank + shape.qk_rope_head_dim)


def mha_cache_elements_per_token(shape: MLAShape) -> int:
    """What the same heads would cache as multi-head attention: every head's decompressed key
    (d_n + d_r) and value (d_v), per layer."""
    per_head = shape.qk_nope_head_dim + shape.qk_rope_head_dim + shape.v_head_dim
    return shape.n_layers * shape.n_heads * per_head


def mla_decode_flops_per_cached_token(shape: MLAShape) -> int:
    """FLOPs one decoding query spends per cached token per layer in the absorbed form: every
    head scores the token against its latent and RoPE key (2 (d_c + d_r)) and adds the weighted
    latent (2 d_c)."""
    return shape.n_heads * 2 * (2 * shape.kv_lora_rank + shape.qk_rope_head_dim)
# [/attention:mla-cache]


# [attention:mla]
def mla_attention(q_nope: torch.Tensor, q_rope: torch.Tensor, c_kv: torch.Tensor,
                  k_rope: torch.Tensor, w_uk: torch.Tensor, w_uv: torch.Tensor, *,
                  absorb: bool) -> torch.Tensor:
    """One decoding query of one sequence and layer through MLA: (h, d_v).

    q_nope (h, d_n), q_rope (h, d_r); cache c_kv (T, d_c), k_rope (T, d_r); decompression
    w_uk (h, d_n, d_c), w_uv (h, d_v, d_c). ``absorb=False`` decompresses every cached token into
    per-head keys and values, as the formulas read; ``absorb=True`` folds w_uk into the query and
    w_uv after the weighted sum, so the cache is read as it is stored.
    """
    scale = 1.0 / math.sqrt(q_nope.shape[-1] + q_rope.shape[-1])
    rope_scores = q_rope @ k_rope.T  # (h, T): the shared RoPE key
    if absorb:
        q_latent = torch.einsum("hd,hdc->hc", q_nope, w_uk)  # (h, d_c): the query in latent space
        p = torch.softmax((q_latent @ c_kv.T + rope_scores) * scale, dim=-1)  # (h, T)
        return torch.einsum("hc,hvc->hv", p @ c_kv, w_uv)  # weighted latent, decompressed once
    k = torch.einsum("tc,hdc->htd", c_kv, w_uk)  # (h, T, d_n) per-head keys
    v = torch.einsum("tc,hvc->htv", c_kv, w_uv)  # (h, T, d_v) per-head values
    p = torch.softmax((torch.einsum("hd,htd->ht", q_nope, k) + rope_scores) * scale, dim=-1)
    return torch.einsum("ht,htv->hv", p, v)
# [/attention:mla]
