"""count_parameters and the teaching formula against published totals, hand arithmetic and
Hugging Face's own modeling code.

The cross-check with Hugging Face instantiates each config with ``AutoModelForCausalLM.from_config``
under ``torch.device("meta")``: the modules and parameter shapes are real, but no storage is
allocated, so even Llama-3-70B builds in about a second. We compare the total and the split into
categories, classifying Hugging Face's parameter names.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from infralens.memory import active_parameters, count_parameters, teaching_formula, teaching_gap
from infralens.models import load_config, shipped_config, shipped_config_names

from .memory_published_totals import PUBLISHED_TOTALS


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTALS))
def test_published_totals(name):
    assert count_parameters(shipped_config(name)).total == PUBLISHED_TOTALS[name]


def test_every_shipped_config_has_a_published_total():
    assert set(shipped_config_names()) == set(PUBLISHED_TOTALS)


def test_gpt2_small_by_hand():
    V, d, L, P = 50257, 768, 12, 1024
    count = count_parameters(shipped_config("gpt2"))
    assert count.embedding == V * d + P * d  # wte + wpe
    assert count.attention == L * ((d * 3 * d + 3 * d) + (d * d + d))  # c_attn + c_proj
    assert count.mlp == L * ((d * 4 * d + 4 * d) + (4 * d * d + d))  # c_fc + c_proj
    assert count.norms == (2 * L + 1) * 2 * d  # ln_1, ln_2 per block + ln_f; weight + bias
    assert count.lm_head == 0 and count.tied
    assert count.per_layer == 12 * d * d + 13 * d


def test_llama_2_7b_by_hand():
    V, d, L, f = 32000, 4096, 32, 11008
    count = count_parameters(shipped_config("llama-2-7b"))
    assert (count.embedding, count.lm_head, count.tied) == (V * d, V * d, False)
    assert count.attention == L * 4 * d * d
    assert count.mlp == L * 3 * d * f
    assert count.norms == (2 * L + 1) * d


def test_gqa_shrinks_k_and_v():
    # Llama-3-8B: 8 KV heads of 128 -> W_k and W_v are 4096 x 1024.
    count = count_parameters(shipped_config("llama-3-8b"))
    assert count.attention == 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024)


def test_mixtral_counts_every_expert_and_the_router():
    count = count_parameters(shipped_config("mixtral-8x7b-v0.1"))
    assert count.mlp == 32 * (8 * 3 * 4096 * 14336 + 4096 * 8)


def test_qwen2_biases_and_tied_head():
    count = count_parameters(shipped_config("qwen2-0.5b"))
    d, kv_dim = 896, 2 * 64
    assert count.attention == 24 * (2 * d * d + 2 * d * kv_dim + d + 2 * kv_dim)
    assert count.lm_head == 0 and count.tied


def test_rows_sum_to_total_and_accept_a_shape():
    shape = load_config(shipped_config("llama-3-8b"))
    count = count_parameters(shape)
    rows = dict(count.rows())
    assert list(rows)[-1] == "total"
    assert sum(v for k, v in rows.items() if k != "total") == rows["total"] == count.total


# --- the teaching formula --------------------------------------------------------------------


def test_teaching_formula_gpt2_small():
    d, L, V = 768, 12, 50257
    estimate = teaching_formula(shipped_config("gpt2"))
    assert estimate.mlp_multiplier == 8  # two d x 4d matrices
    assert estimate.total == L * (4 * d * d + 8 * d * d) + V * d == 123_532_032


def test_teaching_formula_swiglu_multiplier():
    estimate = teaching_formula(shipped_config("llama-2-7b"))
    assert estimate.mlp_multiplier == Fraction(3 * 11008, 4096)
    assert estimate.mlp == 32 * 3 * 11008 * 4096


@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTALS))
def test_teaching_gap_accounts_for_every_parameter(name):
    cfg = shipped_config(name)
    gap = sum(term.params for term in teaching_gap(cfg))
    assert teaching_formula(cfg).total + gap == PUBLISHED_TOTALS[name]


def test_teaching_gap_explicit_head_dim_and_biases():
    cfg = {"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 32, "attention_bias": True, "mlp_bias": True}
    terms = {term.name: term.params for term in teaching_gap(cfg)}
    assert terms["query/output width"] == 2 * 2 * 64 * (128 - 64)
    assert terms["grouped-query K/V"] == 2 * 2 * 64 * (64 - 64)
    assert terms["biases"] == 2 * ((128 + 2 * 64 + 64) + (2 * 96 + 64))
    assert teaching_formula(cfg).total + sum(terms.values()) == count_parameters(cfg).total


def test_teaching_gap_gpt2_small():
    terms = {term.name: term.params for term in teaching_gap(shipped_config("gpt2"))}
    assert terms["learned positions"] == 1024 * 768
    assert terms["biases"] == 12 * (3 * 768 + 768 + 4 * 768 + 768)
    assert terms["norms"] == 25 * 2 * 768
    assert terms["grouped-query K/V"] == terms["untied LM head"] == 0


# --- against Hugging Face's modeling code ----------------------------------------------------------

CATEGORIES = ("embedding", "attention", "mlp", "norms", "lm_head")


def category(name: str) -> str:
    """Our category of a Hugging Face parameter name (GPT-2 and Llama-family naming)."""
    leaf = name.split(".")[-2] if name.endswith((".weight", ".bias")) else name.split(".")[-1]
    if "lm_head" in name:
        return "lm_head"
    if leaf in ("wte", "wpe", "embed_tokens"):
        return "embedding"
    if leaf.startswith("ln_") or leaf.endswith("norm"):  # ln_1, ln_f, input_layernorm, norm
        return "norms"
    if ".attn." in name or ".self_attn." in name:
        return "attention"
    if ".mlp." in name:  # dense MLPs, and Mixtral's experts and router
        return "mlp"
    raise AssertionError(f"unclassified Hugging Face parameter: {name}")


def hf_split(cfg: dict) -> dict[str, int]:
    # transformers is the independent reference: without it (or torch) only these tests skip
    transformers = pytest.importorskip(
        "transformers", reason="transformers is the independent reference for parameter counts")
    torch = pytest.importorskip("torch", reason="transformers needs torch to build models")
    transformers.logging.set_verbosity_error()
    config = transformers.AutoConfig.for_model(**cfg)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(config)
    split = dict.fromkeys(CATEGORIES, 0)
    for name, param in model.named_parameters():  # a tied matrix is yielded once
        split[category(name)] += param.numel()
    assert sum(split.values()) == sum(p.numel() for p in model.parameters())
    return split


def ours(cfg: dict) -> dict[str, int]:
    count = count_parameters(cfg)
    return {name: getattr(count, name) for name in CATEGORIES}


ABSENT = ...  # a value for small(): remove this key from the base config


def small(family: str, **changes: object) -> dict:
    """A tiny config of the family, with ``changes`` applied (``ABSENT`` deletes a key)."""
    base = {"model_type": family, "vocab_size": 101, "hidden_size": 64,
            "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 8,
            "num_key_value_heads": 8}
    if family == "gpt2":
        base = {"model_type": "gpt2", "vocab_size": 101, "n_embd": 64, "n_layer": 2,
                "n_head": 4, "n_positions": 32}
    return {k: v for k, v in {**base, **changes}.items() if v is not ABSENT}


SYNTHETIC = {
    "gpt2": small("gpt2"),
    "gpt2 untied, n_inner": small("gpt2", tie_word_embeddings=False, n_inner=80),
    "llama MHA": small("llama"),
    "llama GQA": small("llama", num_key_value_heads=2),
    "llama MQA": small("llama", num_key_value_heads=1),
    "llama tied": small("llama", tie_word_embeddings=True),
    "llama kv absent": small("llama", num_key_value_heads=ABSENT),
    "llama kv null": small("llama", num_key_value_heads=None),
    "llama attention_bias": small("llama", attention_bias=True, num_key_value_heads=2),
    "llama mlp_bias": small("llama", mlp_bias=True),
    "llama both biases, tied": small("llama", attention_bias=True, mlp_bias=True,
                                     tie_word_embeddings=True),
    "llama explicit head_dim": small("llama", head_dim=16, num_key_value_heads=2),
    "mistral GQA": small("mistral", num_key_value_heads=4),
    "mistral kv absent (8)": small("mistral", num_attention_heads=16, num_key_value_heads=ABSENT),
    "mistral-nemo-like head_dim": small("mistral", head_dim=12, num_key_value_heads=2),
    "mistral bias keys ignored": small("mistral", attention_bias=True, mlp_bias=True),
    "mixtral 3 experts top-1": small("mixtral", num_local_experts=3, num_experts_per_tok=1,
                                     num_key_value_heads=2),
    "mixtral default experts": small("mixtral", num_key_value_heads=4),
    "mixtral kv absent (8)": small("mixtral", num_attention_heads=16, num_key_value_heads=ABSENT,
                                   num_local_experts=2),
    "mixtral tied": small("mixtral", num_local_experts=2, tie_word_embeddings=True),
    "qwen2 GQA untied": small("qwen2", num_key_value_heads=2),
    "qwen2 tied": small("qwen2", num_key_value_heads=4, tie_word_embeddings=True),
    "qwen2 kv absent (32)": small("qwen2", num_attention_heads=32, num_key_value_heads=ABSENT),
    "qwen2 explicit head_dim": small("qwen2", head_dim=4, num_key_value_heads=2),
}


@pytest.mark.parametrize("cfg", SYNTHETIC.values(), ids=SYNTHETIC.keys())
def test_synthetic_variants_match_hugging_face(cfg):
    assert ours(cfg) == hf_split(cfg)


@pytest.mark.hf_full_size
@pytest.mark.parametrize("name", sorted(PUBLISHED_TOTALS))
def test_shipped_configs_match_hugging_face(name):
    cfg = shipped_config(name)
    split = hf_split(cfg)
    assert ours(cfg) == split
    assert sum(split.values()) == PUBLISHED_TOTALS[name]


# --- parameters one token uses ---------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(n for n in PUBLISHED_TOTALS if n != "mixtral-8x7b-v0.1"))
def test_a_dense_model_uses_every_parameter(name):
    assert not load_config(shipped_config(name)).is_moe
    assert active_parameters(shipped_config(name)) == PUBLISHED_TOTALS[name]


def test_mixtral_uses_12_9b_of_its_46_7b_parameters():
    # Mistral AI's announcement of Mixtral 8x7B (December 2023): "46.7B total parameters but only
    # uses 12.9B parameters per token"; the paper (Jiang et al. 2024) rounds them to 47B and 13B.
    cfg = shipped_config("mixtral-8x7b-v0.1")
    assert round(PUBLISHED_TOTALS["mixtral-8x7b-v0.1"] / 1e9, 1) == 46.7
    assert round(active_parameters(cfg) / 1e9, 1) == 12.9
    # By hand: 32 layers skip 8 - 2 = 6 SwiGLU experts of 3 x 4096 x 14336 each.
    assert active_parameters(cfg) == PUBLISHED_TOTALS["mixtral-8x7b-v0.1"] - 32 * 6 * 3 * 4096 * 14336


def test_active_parameters_accepts_a_shape_and_a_dict_alike():
    cfg = small("mixtral", num_local_experts=4, num_experts_per_tok=2)
    assert active_parameters(load_config(cfg)) == active_parameters(cfg) < count_parameters(cfg).total
    every_expert = small("mixtral", num_local_experts=4, num_experts_per_tok=4)
    assert active_parameters(every_expert) == count_parameters(every_expert).total  # none skipped


def _experts_without_gradient(model, n_experts: int) -> int:
    """Parameters of the experts that got no gradient, whichever layout the transformers version
    stores them in: one fused tensor per projection with the expert first (``experts.down_proj``),
    or one module per expert (``experts.3.w2.weight``)."""
    groups: dict[tuple[str, int], list] = {}  # (layer's experts, expert) -> its gradient pieces
    for name, param in model.named_parameters():
        if ".experts." not in name:
            continue
        grad = param.grad if param.grad is not None else param.new_zeros(param.shape)
        head, _, rest = name.partition(".experts.")
        index = rest.split(".")[0]
        if index.isdigit():
            groups.setdefault((head, int(index)), []).append(grad)
        else:
            assert param.shape[0] == n_experts, name  # fused: (experts, ...)
            for e in range(n_experts):
                groups.setdefault((head, e), []).append(grad[e])
    return sum(sum(g.numel() for g in pieces) for pieces in groups.values()
               if not any(g.any() for g in pieces))


@pytest.mark.parametrize("experts, k", [(4, 2), (3, 1), (8, 2)])
def test_active_parameters_match_the_experts_hugging_face_routes_one_token_to(experts, k):
    # One token through a real (tiny, randomly initialized) Mixtral of transformers: the experts
    # its router did not pick get no gradient; everything else, the whole embedding table
    # included, counts as used, as active_parameters defines it.
    transformers = pytest.importorskip(
        "transformers", reason="transformers is the independent reference for MoE routing")
    torch = pytest.importorskip("torch", reason="transformers needs torch to build models")
    transformers.logging.set_verbosity_error()
    cfg = small("mixtral", num_local_experts=experts, num_experts_per_tok=k, num_key_value_heads=2)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**cfg))
    model.eval()
    model(torch.tensor([[7]])).logits.sum().backward()
    total = sum(p.numel() for p in model.parameters())
    skipped = _experts_without_gradient(model, experts)
    one_expert = 3 * 64 * 96  # gate, up and down of d = 64, d_ff = 96
    assert skipped == cfg["num_hidden_layers"] * (experts - k) * one_expert  # k experts per layer ran
    assert active_parameters(cfg) == total - skipped
