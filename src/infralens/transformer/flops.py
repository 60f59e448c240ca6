"""FLOPs per token of a decoder-only transformer, from the same config Lab 01 counts.

The parameter formulas live in :mod:`infralens.memory.params`; this module only *uses* them. The
rule that turns parameters into FLOPs: a token that passes through a weight matrix of ``n``
entries costs ``2n`` FLOPs (one multiply and one add per entry). So the forward FLOPs of one
token are

    2 * (attention projections + the MLP the token actually visits + LM head)   per-token matmuls
  + 4 * L * a * d_h * c                                                          attention core

where ``c`` is the number of keys the token attends to: ``q k^T`` costs ``2 a d_h`` FLOPs per key
and ``p v`` the same again. A sliding window of ``W`` keys (Mistral-7B-v0.1's ``sliding_window``)
caps that number: the token at position ``t`` attends to ``min(t, W)`` keys, not ``t``. Norms,
the softmax, RoPE and residual adds are elementwise: a few FLOPs per activation, not per weight,
and left out. The embedding lookup is a gather (no FLOPs);
the LM head is a full h x V matmul even when its matrix is tied to the embedding table.
Biases are counted like weights (2 FLOPs each instead of 1), an error of order 1/h.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from pathlib import Path
from types import MappingProxyType

from infralens.memory import count_parameters, kv_cache_bytes
from infralens.memory.params import attention_params_per_layer, lm_head_params, mlp_params_per_layer
from infralens.models import ConfigLike, ModelShape, as_shape, shipped_config
from infralens.tools.checks import require_positive

#: Training context of a shipped config where its position limit is not the context it was trained
#: at. Mistral-7B-v0.1: ``max_position_embeddings`` is 32,768, the longest position it accepts, but
#: Table 1 of Jiang et al. (2023) gives ``context_len`` = 8,192. Qwen2: the configs accept
#: 131,072 positions, reached with YaRN and Dual Chunk Attention at inference; pre-training ended
#: at 32,768 tokens (Yang et al. 2024, Qwen2 Technical Report, section 3.2, long-context training).
TRAINED_CONTEXT: Mapping[str, int] = MappingProxyType(
    {"mistral-7b-v0.1": 8192, "qwen2-0.5b": 32768, "qwen2-7b": 32768})


# [transformer:flops-params]
def active_mlp_params_per_layer(shape: ModelShape) -> int:
    """MLP parameters one token passes through in one layer: k experts and the router if MoE."""
    if not shape.is_moe:
        return mlp_params_per_layer(shape)
    one_expert = mlp_params_per_layer(replace(shape, n_experts=0, experts_per_token=0))
    router = mlp_params_per_layer(shape) - shape.n_experts * one_expert
    return shape.experts_per_token * one_expert + router


def matmul_params(config: ConfigLike) -> int:
    """N_mm: the weights one token is multiplied by (projections, active MLP, LM head)."""
    shape = as_shape(config)
    per_layer = attention_params_per_layer(shape) + active_mlp_params_per_layer(shape)
    head = lm_head_params(replace(shape, tie_embeddings=False))  # a tied head still runs: h x V
    return shape.n_layers * per_layer + head
# [/transformer:flops-params]


@dataclass(frozen=True)
class TokenFlops:
    """Forward FLOPs of one token attending to ``context`` keys, by category."""

    projections: int  # q, k, v and output projections, all layers
    mlp: int  # the MLP (active experts and router), all layers
    lm_head: int  # h x V
    attention: Fraction  # q k^T and p v, all layers (a fraction when context is an average)
    context: Fraction

    @property
    def matmuls(self) -> int:
        """The part that is 2 N_mm: independent of the context."""
        return self.projections + self.mlp + self.lm_head

    @property
    def total(self) -> Fraction:
        return self.matmuls + self.attention

    @property
    def attention_share(self) -> float:
        return float(self.attention / self.total)

    def rows(self) -> tuple[tuple[str, float], ...]:
        return (("projections (q, k, v, o)", self.projections), ("MLP", self.mlp),
                ("LM head", self.lm_head), ("attention core (q k^T, p v)", float(self.attention)),
                ("total", float(self.total)))


# [transformer:flops-per-token]
def attention_window(config: ConfigLike) -> int | None:
    """The sliding window W of a Hugging Face config, or None when every query sees all its keys.

    Read from ``sliding_window`` (Mistral-7B-v0.1: 4096). ``null`` means no window (Mixtral), and
    so does ``use_sliding_window: false`` (Qwen2 ships a ``sliding_window`` it does not use). A
    :class:`ModelShape` carries no window: pass ``window=`` explicitly for one.
    """
    if isinstance(config, ModelShape):
        return None
    raw = config if isinstance(config, Mapping) else _read_config(config)
    window = raw.get("sliding_window")
    if window is None or raw.get("use_sliding_window") is False:
        return None
    return int(window)


def _read_config(path: str | Path) -> Mapping:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _window(config: ConfigLike, window: int | None) -> int | None:
    return window if window is not None else attention_window(config)


def forward_flops_per_token(config: ConfigLike, context: int | Fraction,
                            window: int | None = None) -> TokenFlops:
    """Forward FLOPs of one token that attends to ``context`` keys (itself included).

    With a sliding window (``window``, or the config's ``sliding_window``) the token attends to
    ``min(context, W)`` keys. For the average over a sequence pass ``causal_mean_context(s, W)``,
    which is already at most W: the mean of min(t, W) is not min(mean of t, W).
    """
    shape = as_shape(config)
    L, a, d_h = shape.n_layers, shape.n_heads, shape.head_dim
    W = _window(config, window)
    attended = Fraction(context) if W is None else min(Fraction(context), Fraction(W))
    return TokenFlops(
        projections=2 * L * attention_params_per_layer(shape),
        mlp=2 * L * active_mlp_params_per_layer(shape),
        lm_head=2 * lm_head_params(replace(shape, tie_embeddings=False)),
        attention=4 * L * a * d_h * attended,  # 2 a d_h per key for q.k, 2 for p.v
        context=attended,
    )


def causal_mean_context(seq_len: int, window: int | None = None) -> Fraction:
    """Keys a query sees on average under a causal mask, (1/s) * sum over t = 1..s of min(t, W).

    No window: (1 + 2 + ... + s) / s = (s + 1) / 2. Window W < s: the first W queries see
    1, ..., W keys and the other s - W see W each, so the mean is W - W (W - 1) / (2 s).
    """
    if window is None or window >= seq_len:
        return Fraction(seq_len + 1, 2)
    return Fraction(window) - Fraction(window * (window - 1), 2 * seq_len)


def training_flops_per_token(config: ConfigLike, seq_len: int, causal: bool = True,
                             window: int | None = None) -> Fraction:
    """Forward + backward FLOPs per trained token: 3x the forward.

    Every matmul Y = X W of the forward pass has two in the backward pass, dX = dY W^T and
    dW = X^T dY, each as large as the forward one. (A FlashAttention backward that recomputes
    the scores runs 5 attention matmuls where the forward ran 2: count 3.5x for that part if you
    want hardware FLOPs rather than model FLOPs.)
    """
    W = _window(config, window)
    if causal:
        context = causal_mean_context(seq_len, W)
    else:
        context = Fraction(seq_len if W is None else min(seq_len, W))
    return 3 * forward_flops_per_token(config, context, W).total
# [/transformer:flops-per-token]


def trained_context(name: str) -> int:
    """The sequence length the shipped model ``name`` was trained at: :data:`TRAINED_CONTEXT` where
    its paper says so, else the config's ``max_position_embeddings`` (``n_positions`` for GPT-2)."""
    cfg = shipped_config(name)
    return TRAINED_CONTEXT.get(name) or cfg.get("max_position_embeddings") or cfg["n_positions"]


def fmt_gflop(flops: float) -> str:
    """A FLOP count in decimal GFLOP (10**9) with one decimal: ``fmt_gflop(1.406e11) == "140.6 GFLOP"``."""
    return f"{float(flops) / 10**9:,.1f} GFLOP"


def palm_flops_per_token(params: int, layers: int, heads: int, head_dim: int, seq: int) -> int:
    """PaLM's model FLOPs per trained token (Chowdhery et al. 2022, App. B): 6N + 12·L·H·Q·T.

    N parameters, L layers, H heads of width Q, sequence length T. The attention term counts the
    full (non-causal) score matrix, as the paper does.
    """
    require_positive(params=params, layers=layers, heads=heads, head_dim=head_dim, seq=seq)
    return 6 * params + 12 * layers * heads * head_dim * seq


def palm_training_flops_per_token(config: ConfigLike, seq_len: int) -> int:
    """:func:`palm_flops_per_token` of a config (N: all its parameters)."""
    shape = as_shape(config)
    return palm_flops_per_token(count_parameters(shape).total, shape.n_layers, shape.n_heads,
                                shape.head_dim, seq_len)


def attention_crossover_context(config: ConfigLike, window: int | None = None) -> Fraction | None:
    """The context c* at which the attention core costs as much as all per-token matmuls.

    None when a sliding window (``window`` or the config's) caps every query below c*: then
    attention never catches up with the matmuls, at any sequence length.
    """
    shape = as_shape(config)
    per_key = 4 * shape.n_layers * shape.n_heads * shape.head_dim
    c_star = Fraction(forward_flops_per_token(shape, 0).matmuls, per_key)
    W = _window(config, window)
    return None if W is not None and c_star > W else c_star


# [transformer:decode-step]
@dataclass(frozen=True)
class DecodeStep:
    """One decoding step for ``batch`` sequences whose new token attends to ``context`` keys."""

    flops_matmul: int  # 2 N_mm per sequence: every weight is used once per new token
    flops_attention: int  # 4 L a d_h per key per sequence
    weight_bytes: int  # every weight is read once per step, whatever the batch
    kv_bytes: int  # every sequence reads its own cache: K and V of all context keys

    @property
    def flops(self) -> int:
        return self.flops_matmul + self.flops_attention

    @property
    def bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte of the whole step."""
        return self.flops / self.bytes

    @property
    def attention_intensity(self) -> float:
        """FLOPs per byte of the attention part alone: 2 a / (a_kv * bytes per element)."""
        return self.flops_attention / self.kv_bytes


def decode_step(config: ConfigLike, batch: int, context: int, weight_bytes_per_param: int = 2,
                kv_bytes_per_elem: int = 2, window: int | None = None) -> DecodeStep:
    """A step whose new tokens see ``context`` keys (at most W of them under a sliding window)."""
    shape = as_shape(config)
    per_token = forward_flops_per_token(config, context, window)
    attended = int(per_token.context)  # the keys actually read: min(context, W)
    return DecodeStep(
        flops_matmul=batch * per_token.matmuls,
        flops_attention=int(batch * per_token.attention),
        weight_bytes=weight_bytes_per_param * matmul_params(shape),
        kv_bytes=kv_cache_bytes(shape, batch, attended, bytes_per_elem=kv_bytes_per_elem),
    )
# [/transformer:decode-step]
