"""load_config: family key names, Hugging Face defaults, and one-line errors."""

from __future__ import annotations

import json

import pytest

from infralens.models import (
    SUPPORTED_FAMILIES,
    ConfigError,
    ModelShape,
    load_config,
)

LLAMA = {
    "model_type": "llama",
    "vocab_size": 100,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 2,
    "num_attention_heads": 8,
}
GPT2 = {"model_type": "gpt2", "vocab_size": 100, "n_embd": 64, "n_layer": 2, "n_head": 4,
        "n_positions": 32}


def with_(base: dict, **changes: object) -> dict:
    return {**base, **changes}


def without(base: dict, key: str) -> dict:
    return {k: v for k, v in base.items() if k != key}


def config_error(cfg: object) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(cfg)  # type: ignore[arg-type]
    message = str(info.value)
    assert "\n" not in message, "errors must be one line"
    return message


# --- normalization -----------------------------------------------------------------------------


def test_gpt2_defaults():
    shape = load_config(GPT2)
    assert shape == ModelShape(
        family="gpt2", vocab_size=100, d_model=64, n_layers=2, n_heads=4, n_kv_heads=4,
        head_dim=16, d_ff=256, max_positions=32, tie_embeddings=True, qkv_bias=True,
        o_bias=True, mlp_bias=True, norm="layernorm", mlp="gelu",
    )
    assert load_config(with_(GPT2, n_inner=None)).d_ff == 256  # null means 4 * n_embd
    assert load_config(with_(GPT2, n_inner=100)).d_ff == 100
    assert not load_config(with_(GPT2, tie_word_embeddings=False)).tie_embeddings


def test_llama_defaults():
    shape = load_config(LLAMA)
    assert (shape.n_kv_heads, shape.head_dim, shape.d_ff) == (8, 8, 96)
    assert not (shape.tie_embeddings or shape.qkv_bias or shape.o_bias or shape.mlp_bias)
    assert (shape.norm, shape.mlp, shape.max_positions, shape.n_experts) == (
        "rmsnorm", "swiglu", 0, 0)


def test_llama_bias_switches():
    attn = load_config(with_(LLAMA, attention_bias=True))
    assert (attn.qkv_bias, attn.o_bias, attn.mlp_bias) == (True, True, False)
    mlp = load_config(with_(LLAMA, mlp_bias=True))
    assert (mlp.qkv_bias, mlp.o_bias, mlp.mlp_bias) == (False, False, True)


def test_mistral_and_mixtral_have_no_biases_whatever_the_config_says():
    for family in ("mistral", "mixtral"):
        shape = load_config(with_(LLAMA, model_type=family, attention_bias=True, mlp_bias=True))
        assert not (shape.qkv_bias or shape.o_bias or shape.mlp_bias)


def test_qwen2_has_qkv_bias_but_no_output_bias():
    shape = load_config(with_(LLAMA, model_type="qwen2", num_key_value_heads=2))
    assert (shape.qkv_bias, shape.o_bias, shape.mlp_bias) == (True, False, False)
    assert load_config(with_(LLAMA, model_type="qwen2", num_key_value_heads=2,
                             tie_word_embeddings=True)).tie_embeddings


@pytest.mark.parametrize(
    ("family", "heads", "expected"),
    [("llama", 8, 8), ("mistral", 16, 8), ("mixtral", 16, 8), ("qwen2", 32, 32)],
)
def test_kv_heads_when_absent_follow_hugging_face(family, heads, expected):
    cfg = with_(LLAMA, model_type=family, num_attention_heads=heads)
    assert load_config(cfg).n_kv_heads == expected


@pytest.mark.parametrize("family", ["llama", "mistral", "mixtral", "qwen2"])
def test_kv_heads_null_means_one_per_query_head(family):
    cfg = with_(LLAMA, model_type=family, num_key_value_heads=None)
    assert load_config(cfg).n_kv_heads == 8


def test_explicit_head_dim_wins_even_when_heads_do_not_divide_hidden():
    shape = load_config(with_(LLAMA, hidden_size=100, num_attention_heads=3, head_dim=32,
                              num_key_value_heads=1))
    assert (shape.head_dim, shape.n_heads * shape.head_dim) == (32, 96)


def test_mixtral_experts():
    shape = load_config(with_(LLAMA, model_type="mixtral"))
    assert (shape.n_experts, shape.experts_per_token, shape.is_moe) == (8, 2, True)
    shape = load_config(with_(LLAMA, model_type="mixtral", num_local_experts=4,
                              num_experts_per_tok=1))
    assert (shape.n_experts, shape.experts_per_token) == (4, 1)


def test_path_and_dict_give_the_same_shape(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(LLAMA))
    assert load_config(path) == load_config(str(path)) == load_config(LLAMA)


# --- errors: one line, naming the problem ----------------------------------------------------


@pytest.mark.parametrize("key", ["vocab_size", "hidden_size", "intermediate_size",
                                 "num_hidden_layers", "num_attention_heads", "model_type"])
def test_missing_required_key_is_named(key):
    assert f"missing required key '{key}'" in config_error(without(LLAMA, key))


@pytest.mark.parametrize("key", ["n_embd", "n_layer", "n_head", "n_positions", "vocab_size"])
def test_missing_gpt2_key_is_named(key):
    assert f"'{key}'" in config_error(without(GPT2, key))


def test_heads_not_dividing_hidden():
    message = config_error(with_(LLAMA, hidden_size=100, num_attention_heads=3))
    assert "does not divide" in message and "100" in message and "3" in message
    assert "does not divide 'n_embd'" in config_error(with_(GPT2, n_head=5))


def test_heads_not_divisible_by_kv_heads():
    message = config_error(with_(LLAMA, num_key_value_heads=3))
    assert "not divisible by num_key_value_heads (3)" in message


def test_absent_kv_heads_error_says_it_is_the_default():
    message = config_error(with_(LLAMA, model_type="qwen2", num_attention_heads=16))
    assert "num_key_value_heads (32, the qwen2 default when the key is absent)" in message


@pytest.mark.parametrize("value", [0, -4, 2.5, "64", True, None])
def test_sizes_must_be_positive_integers(value):
    assert "'hidden_size' must be a positive integer" in config_error(
        with_(LLAMA, hidden_size=value))


@pytest.mark.parametrize("key", ["num_key_value_heads", "head_dim", "num_local_experts"])
def test_optional_sizes_are_checked_too(key):
    cfg = with_(LLAMA, model_type="mixtral", **{key: -1})
    assert f"'{key}' must be a positive integer" in config_error(cfg)


def test_flags_must_be_booleans():
    assert "'tie_word_embeddings' must be true or false" in config_error(
        with_(LLAMA, tie_word_embeddings="yes"))


def test_more_experts_per_token_than_experts():
    cfg = with_(LLAMA, model_type="mixtral", num_local_experts=2, num_experts_per_tok=3)
    assert "exceeds num_local_experts" in config_error(cfg)


def test_unknown_model_type_lists_supported():
    message = config_error(with_(LLAMA, model_type="bert"))
    assert "unknown model_type 'bert'" in message
    assert all(family in message for family in SUPPORTED_FAMILIES)


def test_missing_file(tmp_path):
    message = config_error(tmp_path / "nope.json")
    assert "cannot read config file" in message and "nope.json" in message


def test_directory_instead_of_file(tmp_path):
    assert "cannot read config file" in config_error(tmp_path)


def test_malformed_json(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",\n "hidden_size": 64,,}')
    message = config_error(path)
    assert "is not valid JSON" in message and "line 2" in message


def test_json_that_is_not_an_object(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("[1, 2, 3]")
    assert "must be a JSON object" in config_error(path)


def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)
