"""FLOPs per token and per decoding step, built on Lab 01's parameter counts."""

from fractions import Fraction

import pytest

from infralens.memory import count_parameters, kv_cache_bytes
from infralens.models import load_config, shipped_config, shipped_config_names
from infralens.models.config import ConfigError
from infralens.transformer.flops import (
    active_mlp_params_per_layer,
    attention_crossover_context,
    attention_window,
    causal_mean_context,
    decode_step,
    fmt_gflop,
    forward_flops_per_token,
    matmul_params,
    palm_training_flops_per_token,
    trained_context,
    training_flops_per_token,
)

SHAPES = {name: load_config(shipped_config(name)) for name in shipped_config_names()}
MISTRAL = shipped_config("mistral-7b-v0.1")  # the raw config: it carries sliding_window


@pytest.mark.parametrize("name", sorted(n for n, s in SHAPES.items() if not s.is_moe))
def test_matmul_params_of_dense_models(name):
    shape, count = SHAPES[name], count_parameters(SHAPES[name])
    # every parameter except the gathered tables and the norms; a tied head is used once more
    tied_head = shape.vocab_size * shape.d_model if shape.tie_embeddings else 0
    expected = count.total - count.embedding - count.norms + tied_head
    assert matmul_params(shape) == expected


def test_mixtral_active_parameters_are_about_13b():
    shape = SHAPES["mixtral-8x7b-v0.1"]
    count = count_parameters(shape)
    active = matmul_params(shape) + count.embedding + count.norms  # as the paper counts them
    assert 12.8e9 < active < 13.0e9  # "13B active parameters" (Jiang et al. 2024)
    dense_mlp = 3 * shape.d_model * shape.d_ff
    assert active_mlp_params_per_layer(shape) == 2 * dense_mlp + shape.d_model * shape.n_experts


def test_per_token_flops_and_shares():
    shape = SHAPES["llama-3-8b"]
    t = forward_flops_per_token(shape, 4096)
    assert t.matmuls == 2 * matmul_params(shape)
    assert t.attention == 4 * 32 * 32 * 128 * 4096  # 4 L a d_h c
    assert 0 < t.attention_share < 1
    c = attention_crossover_context(shape)
    at_c = forward_flops_per_token(shape, c)
    assert at_c.attention == at_c.matmuls


def test_causal_context_and_training():
    assert causal_mean_context(4) == Fraction(5, 2)
    shape = SHAPES["gpt2"]
    s = 1024
    assert training_flops_per_token(shape, s) == 3 * forward_flops_per_token(shape, Fraction(s + 1, 2)).total
    palm = palm_training_flops_per_token(shape, s)
    assert palm == 6 * count_parameters(shape).total + 12 * 12 * 12 * 64 * s


def test_decode_step():
    shape = SHAPES["llama-3-70b"]
    step = decode_step(shape, batch=4, context=8192)
    group = shape.n_heads // shape.n_kv_heads
    assert step.attention_intensity == 2 * group / 2  # 2 g / (bytes per element)
    assert step.weight_bytes == 2 * matmul_params(shape)
    assert decode_step(shape, 8, 8192).weight_bytes == step.weight_bytes  # batch-independent
    assert decode_step(shape, 8, 8192).kv_bytes == 2 * step.kv_bytes


def test_attention_window_is_read_from_the_config():
    assert attention_window(MISTRAL) == 4096
    assert attention_window(shipped_config("mixtral-8x7b-v0.1")) is None  # "sliding_window": null
    assert attention_window(shipped_config("qwen2-7b")) is None  # "use_sliding_window": false
    assert attention_window(SHAPES["mistral-7b-v0.1"]) is None  # a ModelShape carries no window


def test_sliding_window_caps_the_mean_context():
    s, W = 32768, 4096
    # Closed form: queries t = 1..W see t keys, the other s - W see W, so
    # sum_t min(t, W) = W (W + 1) / 2 + (s - W) W, and the mean is W - W (W - 1) / (2 s).
    closed = Fraction(W * (W + 1) // 2 + (s - W) * W, s)
    assert closed == W - Fraction(W * (W - 1), 2 * s) == Fraction(61441, 16)  # 3840 + 1/16
    assert closed == Fraction(sum(min(t, W) for t in range(1, s + 1)), s)  # brute force
    assert causal_mean_context(s, W) == closed and round(closed) == 3840
    assert causal_mean_context(s) == Fraction(s + 1, 2)  # no window: (s + 1) / 2
    assert causal_mean_context(W, W) == Fraction(W + 1, 2)  # a window as long as s changes nothing
    shape = SHAPES["mistral-7b-v0.1"]
    per_key = 4 * shape.n_layers * shape.n_heads * shape.head_dim
    t = forward_flops_per_token(MISTRAL, causal_mean_context(s, W))
    assert t.attention == per_key * closed
    assert training_flops_per_token(MISTRAL, s) == 3 * t.total  # the window is read from the config
    assert training_flops_per_token(shape, s, window=W) == 3 * t.total
    assert training_flops_per_token(shape, s) > training_flops_per_token(MISTRAL, s)
    # one token far past the window attends to exactly W keys; without the window to all s
    assert forward_flops_per_token(MISTRAL, s).context == W
    assert forward_flops_per_token(shape, s).context == s


def test_crossover_respects_the_window():
    shape = SHAPES["mistral-7b-v0.1"]
    c_star = attention_crossover_context(shape)  # no window: a finite crossover
    assert c_star > 4096
    assert attention_crossover_context(MISTRAL) is None  # W = 4096 < c*: never reached
    assert attention_crossover_context(shape, window=int(c_star) + 1) == c_star
    at_w = forward_flops_per_token(MISTRAL, 10**6)  # the most attention a token can cost
    assert at_w.attention < at_w.matmuls


def test_decode_step_reads_only_the_window():
    shape = SHAPES["mistral-7b-v0.1"]
    step = decode_step(MISTRAL, batch=2, context=32768)
    assert step.kv_bytes == kv_cache_bytes(shape, 2, 4096)
    assert step.flops_attention == 2 * 4 * 32 * 32 * 128 * 4096
    assert decode_step(shape, batch=2, context=32768).kv_bytes == kv_cache_bytes(shape, 2, 32768)


# Sequence lengths the models were trained at, as their papers and announcements give them.
PUBLISHED_TRAINING_CONTEXT = {
    "gpt2": 1024,  # Radford et al. (2019): "increase the context size from 512 to 1024 tokens"
    "gpt2-medium": 1024,  # the same paper, every GPT-2 size
    "llama-2-7b": 4096,  # Touvron et al. (2023), Table 1: context length 4k
    "llama-2-13b": 4096,
    "llama-3-8b": 8192,  # Meta's Llama 3 announcement (2024): sequences of 8,192 tokens
    "llama-3-70b": 8192,
    "mistral-7b-v0.1": 8192,  # Jiang et al. (2023), Table 1: context_len 8192
    "mixtral-8x7b-v0.1": 32768,  # Jiang et al. (2024): "trained with a context size of 32k tokens"
    "tinyllama-1.1b": 2048,  # Zhang et al. (2024), TinyLlama: sequence length 2,048
    "qwen2-0.5b": 32768,  # Yang et al. (2024), Qwen2 report: context raised from 4,096 to 32,768
    "qwen2-7b": 32768,  # in the last phase of pre-training; 128K only with YaRN and DCA
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_TRAINING_CONTEXT))
def test_trained_context_is_the_published_one(name):
    assert trained_context(name) == PUBLISHED_TRAINING_CONTEXT[name]


def test_trained_context_falls_back_to_the_config():
    # Mistral's config accepts 32,768 positions, but it was trained at 8,192: the exception table
    # wins. GPT-2 has n_positions, the Llama family max_position_embeddings.
    assert shipped_config("mistral-7b-v0.1")["max_position_embeddings"] == 32768
    assert trained_context("gpt2") == shipped_config("gpt2")["n_positions"]
    assert trained_context("llama-3-8b") == shipped_config("llama-3-8b")["max_position_embeddings"]
    with pytest.raises(ConfigError, match="no shipped config 'gpt-5'"):
        trained_context("gpt-5")


@pytest.mark.parametrize("flops, text", [
    (1.406e11, "140.6 GFLOP"),  # the docstring's example
    (0, "0.0 GFLOP"),
    (1e9, "1.0 GFLOP"),
    (1.234567e13, "12,345.7 GFLOP"),  # thousands separated, one decimal
    (Fraction(281, 2) * 10**9, "140.5 GFLOP"),  # the FLOP counts of this module are Fractions
    (2 * 8_030_261_248, "16.1 GFLOP"),  # an int
])
def test_fmt_gflop(flops, text):
    assert fmt_gflop(flops) == text
