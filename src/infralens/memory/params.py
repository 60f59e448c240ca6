"""Count the trainable parameters of a decoder-only transformer, block by block.

A decoder-only language model is a token-embedding table, ``L`` identical blocks, a final
norm and an output projection (the *LM head*). Each block is

    x = x + Attention(Norm(x))        # q, k, v, o projections
    x = x + MLP(Norm(x))              # 2 matrices (GELU) or 3 (SwiGLU), maybe many experts

so the exact count is a sum of matrix shapes and bias lengths, written out below one
category at a time. Only *trainable parameters* are counted: buffers such as the rotary
``inv_freq`` table or GPT-2's causal-mask tensor are not parameters and cost no optimizer
state.

The second half of the file is the textbook estimate ``L·(4d² + m·d²) + V·d`` and an exact
account of where it differs from the real count (:func:`teaching_gap`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from infralens.memory.report import Breakdown
from infralens.models.config import ConfigLike, ModelShape, as_shape


@dataclass(frozen=True)
class ParamCount(Breakdown):
    """Trainable parameters by category, summed over all layers.

    Attributes:
        embedding: token table (V·d) plus a learned position table (GPT-2 only).
        attention: q, k, v, o weights and biases of every layer.
        mlp: MLP weights and biases of every layer; for a mixture of experts, every expert
            plus the router.
        norms: every per-layer norm and the final norm (weights, and biases for LayerNorm).
        lm_head: the output projection; 0 when it is tied to the token table.
        tied: whether the LM head shares the token-embedding matrix.
        per_layer: parameters of one transformer block (attention + MLP + its two norms).
    """

    embedding: int
    attention: int
    mlp: int
    norms: int
    lm_head: int
    tied: bool
    per_layer: int

    # The total is every trainable parameter: a tied matrix is counted once, under embedding.
    LINES = (("embedding", "embedding"), ("attention", "attention"), ("mlp", "mlp"),
             ("norms", "norms"), ("lm_head", "lm_head"))


def count_parameters(config: ConfigLike) -> ParamCount:
    """Exact trainable-parameter count of the model a config describes.

    ``config`` is a :class:`~infralens.models.config.ModelShape`, a ``config.json`` dict, or
    a path to one. Matches ``sum(p.numel() for p in model.parameters())`` of the Hugging Face
    model (which, like this count, sees a tied matrix once).
    """
    shape = as_shape(config)
    per_layer = (
        attention_params_per_layer(shape)
        + mlp_params_per_layer(shape)
        + norm_params_per_layer(shape)
    )
    return ParamCount(
        embedding=embedding_params(shape),
        attention=shape.n_layers * attention_params_per_layer(shape),
        mlp=shape.n_layers * mlp_params_per_layer(shape),
        norms=shape.n_layers * norm_params_per_layer(shape) + final_norm_params(shape),
        lm_head=lm_head_params(shape),
        tied=shape.tie_embeddings,
        per_layer=per_layer,
    )


def embedding_params(shape: ModelShape) -> int:
    """Token embeddings, plus position embeddings when the model learns them (GPT-2)."""
    # [memory:embedding]
    d = shape.d_model
    token_table = shape.vocab_size * d  # one d-vector per vocabulary entry
    # GPT-2 learns one d-vector per position, up to n_positions. Rotary models (Llama and
    # its descendants) rotate q and k by a fixed angle instead: max_positions is 0 for them.
    position_table = shape.max_positions * d
    return token_table + position_table
    # [/memory:embedding]


def attention_params_per_layer(shape: ModelShape) -> int:
    """Weights and biases of one layer's q, k, v and output projections."""
    # [memory:attention]
    d = shape.d_model
    q_dim = shape.n_heads * shape.head_dim  # equals d unless head_dim is explicit
    kv_dim = shape.n_kv_heads * shape.head_dim  # GQA: fewer K/V heads, thinner K and V
    weights = d * q_dim + d * kv_dim + d * kv_dim + q_dim * d  # W_q, W_k, W_v, W_o
    biases = 0
    if shape.qkv_bias:
        biases += q_dim + kv_dim + kv_dim  # one bias per output feature of q, k, v
    if shape.o_bias:
        biases += d
    return weights + biases
    # [/memory:attention]


def mlp_params_per_layer(shape: ModelShape) -> int:
    """One layer's MLP: a dense block, or all experts of a mixture plus the router."""
    # [memory:mlp]
    d, f = shape.d_model, shape.d_ff
    matrices = 3 if shape.mlp == "swiglu" else 2  # SwiGLU: gate, up, down. GELU: up, down.
    one_mlp = matrices * d * f
    if shape.mlp_bias:
        one_mlp += (matrices - 1) * f + d  # gate/up biases are f long, the down bias d long
    if not shape.is_moe:
        return one_mlp
    # Mixture of experts: every expert is a full MLP and all of them are stored, although
    # each token visits only experts_per_token of them. The router is one d x E matrix.
    router = d * shape.n_experts
    return shape.n_experts * one_mlp + router
    # [/memory:mlp]


# [memory:norms]
def _one_norm(shape: ModelShape) -> int:
    """LayerNorm learns a scale and a shift per channel; RMSNorm learns only the scale."""
    return 2 * shape.d_model if shape.norm == "layernorm" else shape.d_model


def norm_params_per_layer(shape: ModelShape) -> int:
    """A pre-norm block normalizes twice: before attention and before the MLP."""
    return 2 * _one_norm(shape)


def final_norm_params(shape: ModelShape) -> int:
    """One more norm after the last block, just before the LM head."""
    return _one_norm(shape)
# [/memory:norms]


def lm_head_params(shape: ModelShape) -> int:
    """The output projection from d to V logits (no bias in any supported family)."""
    # [memory:lm-head]
    if shape.tie_embeddings:
        # Tied: the LM head *is* the token table (used transposed). It is already counted
        # under embedding, and model.parameters() yields the shared tensor only once.
        return 0
    return shape.d_model * shape.vocab_size
    # [/memory:lm-head]


def active_parameters(config: ConfigLike) -> int:
    """Parameters one token's forward pass uses: all of them for a dense model; for a mixture of
    experts, all but the ``n_experts - experts_per_token`` experts it skips in every layer (the
    router is used by every token)."""
    shape = as_shape(config)
    total = count_parameters(shape).total
    if not shape.is_moe:
        return total
    one_expert = (mlp_params_per_layer(shape) - shape.d_model * shape.n_experts) // shape.n_experts
    return total - shape.n_layers * (shape.n_experts - shape.experts_per_token) * one_expert


# --- The textbook estimate, and where it is wrong -------------------------------------------


@dataclass(frozen=True)
class TeachingEstimate(Breakdown):
    """The back-of-the-envelope count ``L·(4d² + m·d²) + V·d``.

    * ``4d²`` per layer for attention: four d x d matrices (q, k, v, o). This assumes
      multi-head attention (as many K/V heads as query heads), ``head_dim = d / heads`` and
      no biases.
    * ``m·d²`` per layer for the MLP, ``m = (matrices · d_ff) / d``: a GELU MLP with
      ``d_ff = 4d`` has two d x 4d matrices, so ``m = 8``; a SwiGLU MLP has three d x d_ff
      matrices, so ``m = 3·d_ff/d`` (Llama-2-7B: 3 · 11008/4096 ≈ 8.06).
    * ``V·d`` for the token embedding, shared with the LM head.

    Everything else (norms, biases, learned positions, an untied LM head, GQA, extra
    experts) is ignored; :func:`teaching_gap` accounts for each piece exactly.
    """

    attention: int
    mlp: int
    embedding: int
    mlp_multiplier: Fraction

    LINES = (("L·4d² (attention)", "attention"), ("L·m·d² (MLP, m = {mlp_multiplier})", "mlp"),
             ("V·d (embedding)", "embedding"))


@dataclass(frozen=True)
class GapTerm:
    """One reason the exact count differs from :class:`TeachingEstimate` (may be negative)."""

    name: str
    params: int
    why: str


def teaching_formula(config: ConfigLike) -> TeachingEstimate:
    """The textbook estimate ``L·(4d² + m·d²) + V·d`` for this model (one expert if MoE)."""
    shape = as_shape(config)
    d, n_layers = shape.d_model, shape.n_layers
    matrices = 3 if shape.mlp == "swiglu" else 2
    return TeachingEstimate(
        attention=n_layers * 4 * d * d,
        mlp=n_layers * matrices * shape.d_ff * d,  # = L·m·d², kept in exact integers
        embedding=shape.vocab_size * d,
        mlp_multiplier=Fraction(matrices * shape.d_ff, d),
    )


def teaching_gap(config: ConfigLike) -> tuple[GapTerm, ...]:
    """Every difference between the exact count and the textbook estimate, term by term.

    The terms always sum to ``count_parameters(config).total - teaching_formula(config).total``
    exactly. Terms that do not apply to this model are present with ``params == 0``.
    """
    shape = as_shape(config)
    d, n_layers = shape.d_model, shape.n_layers
    q_dim, kv_dim = shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim
    matrices = 3 if shape.mlp == "swiglu" else 2
    dense_mlp_weights = matrices * d * shape.d_ff
    n_mlps = max(shape.n_experts, 1)
    attention_biases = (q_dim + 2 * kv_dim if shape.qkv_bias else 0) + (d if shape.o_bias else 0)
    mlp_biases = n_mlps * ((matrices - 1) * shape.d_ff + d) if shape.mlp_bias else 0
    return (
        GapTerm(
            "grouped-query K/V",
            n_layers * 2 * d * (kv_dim - d),
            "W_k and W_v are d x (n_kv_heads·head_dim), not d x d",
        ),
        GapTerm(
            "query/output width",
            n_layers * 2 * d * (q_dim - d),
            "W_q and W_o are d x (n_heads·head_dim); differs from d x d only for an explicit "
            "head_dim",
        ),
        GapTerm(
            "biases",
            n_layers * (attention_biases + mlp_biases),
            "bias vectors of the attention and MLP projections",
        ),
        GapTerm(
            "norms",
            n_layers * norm_params_per_layer(shape) + final_norm_params(shape),
            "two norms per block plus the final norm",
        ),
        GapTerm(
            "learned positions",
            shape.max_positions * d,
            "a learned position table (GPT-2); rotary models have none",
        ),
        GapTerm(
            "untied LM head",
            lm_head_params(shape),
            "a separate d x V output matrix when it is not tied to the token table",
        ),
        GapTerm(
            "extra experts + router",
            n_layers * ((n_mlps - 1) * dense_mlp_weights + d * shape.n_experts),
            "a mixture of experts stores every expert's MLP and a d x E router",
        ),
    )
