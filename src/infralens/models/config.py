"""Read a Hugging Face ``config.json`` and reduce it to the numbers memory depends on.

Every decoder-only transformer in this lab is described by a handful of integers (vocabulary,
width, depth, heads, MLP width) and a handful of yes/no facts (does it have biases? which
norm? are the input and output embeddings the same matrix?). Hugging Face spells these
differently per model family (``n_embd`` for GPT-2, ``hidden_size`` for Llama) and fills in
defaults when a key is absent. :func:`load_config` does that translation once, into a
frozen :class:`ModelShape`, so the counting code never has to know about key names.

Two rules keep the translation honest:

* **Sizes are required.** Hugging Face would silently fall back to its class defaults
  (``LlamaConfig()`` is a 7B model), so a ``config.json`` with no ``hidden_size`` would be
  counted as a 7B model. We refuse instead: a missing size almost always means the wrong file.
* **Everything else uses Hugging Face's real defaults**, read off
  ``transformers/models/<family>/configuration_<family>.py``. Some are surprising: when
  ``num_key_value_heads`` is *absent*, Mistral and Mixtral assume 8 and Qwen2 assumes 32,
  while Llama assumes one KV head per query head. (An explicit ``null`` means "one per query
  head" in every family.)

Which parameters exist is decided by the modeling code, not by the config: Mistral and
Mixtral build every projection with ``bias=False`` whatever the config says, and Qwen2
always has q/k/v biases and never an output-projection bias.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeAlias

NormKind: TypeAlias = Literal["layernorm", "rmsnorm"]
MlpKind: TypeAlias = Literal["gelu", "swiglu"]

#: The ``model_type`` values this lab understands.
SUPPORTED_FAMILIES: tuple[str, ...] = ("gpt2", "llama", "mistral", "mixtral", "qwen2")

#: ``num_key_value_heads`` when the key is absent; ``None`` means "same as the query heads".
_KV_HEADS_WHEN_ABSENT: dict[str, int | None] = {
    "llama": None,
    "mistral": 8,
    "mixtral": 8,
    "qwen2": 32,
}


class ConfigError(ValueError):
    """A config that cannot describe a model. The message is one line, fit for a terminal."""


@dataclass(frozen=True)
class ModelShape:
    """The architecture of a decoder-only transformer, as far as memory is concerned.

    Attributes:
        family: Hugging Face ``model_type`` (``"gpt2"``, ``"llama"``, ...).
        vocab_size: rows of the token-embedding table (V).
        d_model: width of the residual stream (d, ``hidden_size`` / ``n_embd``).
        n_layers: transformer blocks (L).
        n_heads: query heads.
        n_kv_heads: key/value heads; fewer than ``n_heads`` is grouped-query attention (GQA).
        head_dim: width of one head. Usually ``d_model // n_heads``, but a config may set it
            explicitly (Mistral-Nemo: 32 heads x 128 = 4096 != 5120).
        d_ff: inner width of the MLP (``intermediate_size`` / ``n_inner``).
        max_positions: rows of a *learned* position-embedding table (GPT-2's ``n_positions``);
            0 for rotary families, whose positions cost no parameters.
        tie_embeddings: the output projection (LM head) reuses the token-embedding matrix.
        qkv_bias: the q, k and v projections have biases.
        o_bias: the attention output projection has a bias.
        mlp_bias: the MLP projections have biases.
        norm: ``"layernorm"`` (weight and bias per channel) or ``"rmsnorm"`` (weight only).
        mlp: ``"gelu"`` (two matrices: up, down) or ``"swiglu"`` (three: gate, up, down).
        n_experts: experts per mixture-of-experts layer; 0 for a dense MLP (no router).
        experts_per_token: experts each token is routed to (0 for a dense MLP). It changes
            compute, not parameter memory: every expert is stored.
    """

    family: str
    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    max_positions: int = 0
    tie_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    norm: NormKind = "rmsnorm"
    mlp: MlpKind = "swiglu"
    n_experts: int = 0
    experts_per_token: int = 0

    @property
    def is_moe(self) -> bool:
        """True when the MLP is a mixture of experts with a router."""
        return self.n_experts > 0


#: Anything the counting functions accept as "a model": a shape, a config dict, or a path.
ConfigLike: TypeAlias = ModelShape | Mapping[str, Any] | str | os.PathLike[str]


def load_config(config: Mapping[str, Any] | str | os.PathLike[str]) -> ModelShape:
    """Normalize a Hugging Face ``config.json`` (a dict, or a path to the file) to a ModelShape.

    Raises:
        ConfigError: unreadable file, malformed JSON, unknown ``model_type``, a missing
            required key, a size that is not a positive integer, or heads that do not split
            evenly (see the module docstring for the rules).
    """
    raw = _read_json(config) if isinstance(config, str | os.PathLike) else config
    if not isinstance(raw, Mapping):
        raise ConfigError(f"a config must be a JSON object, got {type(raw).__name__}")
    family = raw.get("model_type")
    if family is None:
        raise ConfigError("missing required key 'model_type'")
    if family not in SUPPORTED_FAMILIES:
        supported = ", ".join(SUPPORTED_FAMILIES)
        raise ConfigError(f"unknown model_type {family!r}; supported: {supported}")
    shape = _gpt2_shape(raw) if family == "gpt2" else _rotary_shape(family, raw)
    _check_consistent(shape, raw)
    return shape


def as_shape(config: ConfigLike) -> ModelShape:
    """Return ``config`` itself if it is already a ModelShape, else :func:`load_config` it."""
    return config if isinstance(config, ModelShape) else load_config(config)


def _read_json(path: str | os.PathLike[str]) -> Any:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ConfigError(f"cannot read config file '{path}': {reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigError(f"config file '{path}' is not valid JSON: {err}") from None


def _size(raw: Mapping[str, Any], key: str) -> int:
    """A required size: present, an integer, and positive."""
    if key not in raw:
        raise ConfigError(f"missing required key '{key}'")
    return _positive(key, raw[key])


def _positive(key: str, value: Any) -> int:
    # bool is a subclass of int in Python; `true` is not a size.
    if not isinstance(value, int) or isinstance(value, bool):
        raise ConfigError(f"'{key}' must be a positive integer, got {value!r}")
    if value <= 0:
        raise ConfigError(f"'{key}' must be a positive integer, got {value}")
    return value


def _optional_size(raw: Mapping[str, Any], key: str, fallback: int) -> int:
    """An optional size: ``fallback`` when absent or null, else checked like a required one."""
    value = raw.get(key)
    return fallback if value is None else _positive(key, value)


def _flag(raw: Mapping[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"'{key}' must be true or false, got {value!r}")
    return value


def _even_head_dim(d_model: int, n_heads: int, hidden_key: str, heads_key: str) -> int:
    """``d_model // n_heads``, refusing a remainder (used when no explicit ``head_dim``)."""
    if d_model % n_heads:
        hint = "" if hidden_key == "n_embd" else " and no explicit 'head_dim' is given"
        raise ConfigError(
            f"'{heads_key}' ({n_heads}) does not divide '{hidden_key}' ({d_model}){hint}"
        )
    return d_model // n_heads


def _gpt2_shape(raw: Mapping[str, Any]) -> ModelShape:
    """GPT-2: learned positions, LayerNorm, a 4d GELU MLP, biases everywhere, tied LM head."""
    d_model, n_heads = _size(raw, "n_embd"), _size(raw, "n_head")
    return ModelShape(
        family="gpt2",
        vocab_size=_size(raw, "vocab_size"),
        d_model=d_model,
        n_layers=_size(raw, "n_layer"),
        n_heads=n_heads,
        n_kv_heads=n_heads,  # GPT-2 predates grouped-query attention
        head_dim=_even_head_dim(d_model, n_heads, "n_embd", "n_head"),
        d_ff=_optional_size(raw, "n_inner", 4 * d_model),  # n_inner: null means 4 * n_embd
        max_positions=_size(raw, "n_positions"),
        tie_embeddings=_flag(raw, "tie_word_embeddings", True),
        qkv_bias=True,
        o_bias=True,
        mlp_bias=True,
        norm="layernorm",
        mlp="gelu",
    )


def _rotary_shape(family: str, raw: Mapping[str, Any]) -> ModelShape:
    """Llama and its descendants: RoPE (no position parameters), RMSNorm, a SwiGLU MLP."""
    d_model, n_heads = _size(raw, "hidden_size"), _size(raw, "num_attention_heads")
    # [models:normalize]
    if "num_key_value_heads" in raw:  # a number, or null for "one KV head per query head"
        n_kv_heads = _optional_size(raw, "num_key_value_heads", n_heads)
    else:  # absent: Hugging Face's per-family default (8 for Mistral, 32 for Qwen2!)
        n_kv_heads = _KV_HEADS_WHEN_ABSENT[family] or n_heads
    if raw.get("head_dim") is not None:  # explicit, e.g. Mistral-Nemo: 32 x 128 != 5120
        head_dim = _positive("head_dim", raw["head_dim"])
    else:
        head_dim = _even_head_dim(d_model, n_heads, "hidden_size", "num_attention_heads")
    # Biases come from each family's modeling code: Llama reads two switches, Qwen2
    # hard-codes q/k/v biases (none on o_proj), Mistral and Mixtral have none at all.
    attention_bias = family == "llama" and _flag(raw, "attention_bias", False)
    qkv_bias = attention_bias or family == "qwen2"
    mlp_bias = family == "llama" and _flag(raw, "mlp_bias", False)
    n_experts = _optional_size(raw, "num_local_experts", 8) if family == "mixtral" else 0
    top_k = _optional_size(raw, "num_experts_per_tok", 2) if family == "mixtral" else 0
    # [/models:normalize]
    return ModelShape(
        family=family,
        vocab_size=_size(raw, "vocab_size"),
        d_model=d_model,
        n_layers=_size(raw, "num_hidden_layers"),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=head_dim,
        d_ff=_size(raw, "intermediate_size"),
        tie_embeddings=_flag(raw, "tie_word_embeddings", False),
        qkv_bias=qkv_bias,
        o_bias=attention_bias,
        mlp_bias=mlp_bias,
        n_experts=n_experts,
        experts_per_token=top_k,
    )


def _check_consistent(shape: ModelShape, raw: Mapping[str, Any]) -> None:
    """Relations between sizes that no single key can violate on its own."""
    if shape.n_heads % shape.n_kv_heads:
        where = ""
        if shape.family != "gpt2" and "num_key_value_heads" not in raw:
            where = f", the {shape.family} default when the key is absent"
        raise ConfigError(
            f"num_attention_heads ({shape.n_heads}) is not divisible by "
            f"num_key_value_heads ({shape.n_kv_heads}{where}): "
            "each KV head must serve a whole group of query heads"
        )
    if shape.experts_per_token > shape.n_experts:
        raise ConfigError(
            f"num_experts_per_tok ({shape.experts_per_token}) exceeds "
            f"num_local_experts ({shape.n_experts})"
        )
