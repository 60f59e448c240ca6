"""One pre-norm decoder block of the Llama family, small enough to read in one sitting.

    x = x + Attention(RMSNorm(x))      # RoPE on q and k, grouped-query attention
    x = x + SwiGLU(RMSNorm(x))         # down(silu(gate(x)) * up(x))

Shape legend: B batch, S positions in this call, h = d_model, a query heads, a_kv KV heads,
d head dimension, f = d_ff. The sizes come from a Lab 01 :class:`~infralens.memory.ModelShape`,
so the block has exactly the parameters ``infralens.memory.count_parameters`` counts for one
layer. ``forward(..., trace=dict)`` records the shape of every named intermediate tensor, which
is what the chapter's data-flow table is checked against.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from infralens.attention.gqa import KVCache, grouped_query_attention
from infralens.models import ModelShape
from infralens.transformer.rope import apply_rope, rope_frequencies


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * g: no mean subtracted, no bias; h parameters."""

    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)  # one statistic per token
        return x / rms * self.weight


class DecoderBlock(nn.Module):
    """A Llama-style block for a dense (non-MoE) rotary ModelShape without biases."""

    def __init__(self, shape: ModelShape, rope_base: float = 10_000.0) -> None:
        super().__init__()
        if shape.mlp != "swiglu" or shape.norm != "rmsnorm" or shape.is_moe:
            raise ValueError("DecoderBlock builds dense SwiGLU/RMSNorm (Llama-style) shapes only")
        if shape.qkv_bias or shape.o_bias or shape.mlp_bias:
            raise ValueError("DecoderBlock has no biases; this shape has some")
        h, a, a_kv, d, f = (shape.d_model, shape.n_heads, shape.n_kv_heads, shape.head_dim,
                            shape.d_ff)
        self.a, self.a_kv, self.d = a, a_kv, d
        self.attn_norm, self.mlp_norm = RMSNorm(h), RMSNorm(h)
        self.wq = nn.Linear(h, a * d, bias=False)
        self.wk = nn.Linear(h, a_kv * d, bias=False)  # GQA: a_kv heads, not a
        self.wv = nn.Linear(h, a_kv * d, bias=False)
        self.wo = nn.Linear(a * d, h, bias=False)
        self.gate = nn.Linear(h, f, bias=False)
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)
        self.register_buffer("freqs", rope_frequencies(d, rope_base), persistent=False)

    # [transformer:block-forward]
    def forward(self, x: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None,
                trace: dict | None = None) -> torch.Tensor:
        B, S, _ = x.shape  # (B, S, h): the residual stream
        y = self.attn_norm(x)  # (B, S, h)
        q = self.wq(y).view(B, S, self.a, self.d).transpose(1, 2)  # (B, a, S, d)
        k = self.wk(y).view(B, S, self.a_kv, self.d).transpose(1, 2)  # (B, a_kv, S, d)
        v = self.wv(y).view(B, S, self.a_kv, self.d).transpose(1, 2)  # (B, a_kv, S, d)
        q = apply_rope(q, positions, self.freqs, "half")  # rotate by absolute position
        k = apply_rope(k, positions, self.freqs, "half")
        if cache is not None:  # decoding: attend over every cached token, not just these S
            k, v = cache.append(k, v)  # (B, a_kv, S_past + S, d)
        o = grouped_query_attention(q, k, v, causal=True)  # (B, a, S, d)
        o = o.transpose(1, 2).reshape(B, S, self.a * self.d)  # (B, S, a*d): heads side by side
        x = x + self.wo(o)  # (B, S, h): first residual add
        y = self.mlp_norm(x)  # (B, S, h)
        u = F.silu(self.gate(y)) * self.up(y)  # (B, S, f): SwiGLU's gated hidden layer
        x = x + self.down(u)  # (B, S, h): second residual add
        # [/transformer:block-forward]
        if trace is not None:
            trace.update({"x": (B, S, self.wq.in_features), "q": tuple(q.shape),
                          "k": tuple(k.shape), "v": tuple(v.shape), "o": tuple(o.shape),
                          "u": tuple(u.shape), "out": tuple(x.shape)})
        return x
