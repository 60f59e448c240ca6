"""Every tensor of a decoder-only forward pass, by shape, from a Lab 01 config.

Pure arithmetic on :class:`~infralens.memory.ModelShape`: no torch. The chapter prints the table
for Llama-3-70B and checks it against the shapes a real block (:mod:`infralens.transformer.block`)
produces on a tiny config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from infralens.models import ConfigLike, as_shape

AttentionKind = Literal["MHA", "GQA", "MQA"]


@dataclass(frozen=True)
class AttentionLayout:
    """How a model's attention heads are arranged."""

    n_heads: int  # query heads, a
    n_kv_heads: int  # key/value heads, a_kv
    head_dim: int  # d_h
    d_model: int  # h

    @property
    def group_size(self) -> int:
        """Query heads that share one K/V head: g = a / a_kv."""
        return self.n_heads // self.n_kv_heads

    @property
    def kind(self) -> AttentionKind:
        if self.n_kv_heads == self.n_heads:
            return "MHA"
        return "MQA" if self.n_kv_heads == 1 else "GQA"


def attention_layout(config: ConfigLike) -> AttentionLayout:
    shape = as_shape(config)
    return AttentionLayout(shape.n_heads, shape.n_kv_heads, shape.head_dim, shape.d_model)


@dataclass(frozen=True)
class TensorRow:
    """One tensor of the forward pass: where it is made, its symbolic and numeric shape."""

    step: str
    tensor: str
    symbols: tuple[str, ...]
    dims: tuple[int, ...]
    note: str = ""

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n


# [transformer:data-flow]
def forward_tensors(config: ConfigLike, batch: int, seq_len: int) -> list[TensorRow]:
    """The tensors of one forward pass over (batch, seq_len) tokens, in the order they are made."""
    m = as_shape(config)
    b, s, h, a, a_kv, d, f, V = (batch, seq_len, m.d_model, m.n_heads, m.n_kv_heads, m.head_dim,
                                 m.d_ff, m.vocab_size)
    R = TensorRow
    rows = [
        R("input", "token ids", ("b", "s"), (b, s), "integers"),
        R("embedding", "x (residual stream)", ("b", "s", "h"), (b, s, h), "a row gather, no FLOPs"),
        R("layer: norm", "norm(x)", ("b", "s", "h"), (b, s, h), "RMSNorm or LayerNorm"),
        R("layer: attention", "q", ("b", "a", "s", "d_h"), (b, a, s, d), "RoPE applied"),
        R("layer: attention", "k, v", ("b", "a_kv", "s", "d_h"), (b, a_kv, s, d),
          "what the KV cache keeps"),
        R("layer: attention", "scores q k^T", ("b", "a", "s", "s"), (b, a, s, s),
          "materialized only by naive attention"),
        R("layer: attention", "heads concatenated", ("b", "s", "a*d_h"), (b, s, a * d), ""),
        R("layer: attention", "x + o-projection", ("b", "s", "h"), (b, s, h), "residual add"),
        R("layer: MLP", "norm(x)", ("b", "s", "h"), (b, s, h), ""),
        R("layer: MLP", "gate, up (hidden)", ("b", "s", "d_ff"), (b, s, f),
          "SwiGLU: silu(gate) * up" if m.mlp == "swiglu" else "GELU input"),
        R("layer: MLP", "x + down-projection", ("b", "s", "h"), (b, s, h), "residual add"),
        R("head", "final norm(x)", ("b", "s", "h"), (b, s, h), f"after all {m.n_layers} layers"),
        R("head", "logits", ("b", "s", "V"), (b, s, V), "LM head"),
    ]
    return rows
# [/transformer:data-flow]
