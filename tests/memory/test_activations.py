"""activation_bytes_per_layer against Korthikanti et al. (2022), Table 2, with fractions."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from infralens.memory import (
    ACTIVATION_TERMS,
    activation_breakdown,
    activation_bytes_per_layer,
)
from infralens.memory.activations import llama_activation_bytes_per_layer


def test_gpt3_175b_no_parallelism():
    # s=2048, b=1, h=12288, a=96: sbh(34 + 5as/h) = 855,638,016 + 2,013,265,920 bytes.
    assert activation_bytes_per_layer(s=2048, b=1, h=12288, a=96) == 2_868_903_936


# A case worked by hand with exact fractions: every Table 2 row.
s, b, h, a, t = 4096, 2, 5120, 40, 8
sbh = s * b * h
TABLE_2 = {
    ("none", False, 1): sbh * (34 + F(5 * a * s, h)),
    ("none", False, t): sbh * (10 + F(24, t) + F(5 * a * s, h * t)),
    ("none", True, t): sbh * (F(34, t) + F(5 * a * s, h * t)),
    ("selective", False, t): sbh * (10 + F(24, t)),
    ("selective", True, t): sbh * F(34, t),
    ("full", False, t): sbh * 2,
    ("full", False, 1): sbh * 2,
    ("full", True, t): sbh * F(2, t),  # the checkpointed input is sequence-sharded
}


@pytest.mark.parametrize(("mode", "sp", "tp"), TABLE_2, ids=[f"{m}-sp{s_}-t{t_}"
                                                             for m, s_, t_ in TABLE_2])
def test_table_2_rows(mode, sp, tp):
    expected = TABLE_2[(mode, sp, tp)]
    assert expected.denominator == 1
    got = activation_bytes_per_layer(s, b, h, a, t=tp, sequence_parallel=sp, recompute=mode)
    assert isinstance(got, int) and got == expected


def test_selective_recompute_removes_exactly_the_attention_scores():
    full = activation_bytes_per_layer(s, b, h, a)
    selective = activation_bytes_per_layer(s, b, h, a, recompute="selective")
    assert full - selective == 5 * a * s * s * b


def test_breakdown_reproduces_34_and_5():
    assert sum(term.sbh_bytes for term in ACTIVATION_TERMS) == 34
    assert sum(term.as2b_bytes for term in ACTIVATION_TERMS) == 5
    assert sum(t_.sbh_bytes for t_ in ACTIVATION_TERMS if not t_.split_by_tp) == 10
    assert sum(t_.sbh_bytes for t_ in ACTIVATION_TERMS if t_.split_by_tp) == 24
    assert all(t_.split_by_tp for t_ in ACTIVATION_TERMS if t_.as2b_bytes)
    blocks = {}
    for term in ACTIVATION_TERMS:
        blocks[term.block] = blocks.get(term.block, 0) + term.sbh_bytes
    assert blocks == {"attention": 11, "mlp": 19, "layernorm": 4}


def test_breakdown_sums_to_the_formula():
    rows = activation_breakdown(2048, 1, 12288, 96)
    assert sum(n for _, _, n in rows) == 2_868_903_936


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"t": 3}, "must divide heads"),  # 3 divides neither a=40 nor h=5120
        ({"t": 16}, "must divide heads"),  # divides h=5120 but not a=40
        ({"a": 48, "t": 3}, "must divide heads"),  # divides a=48 but not h=5120
        ({"recompute": "partial"}, "recompute must be one of"),
        ({"s": 0}, "s must be a positive integer"),
        ({"b": -1}, "b must be a positive integer"),
        ({"h": 2.0}, "h must be a positive integer"),
        ({"t": 0}, "t must be a positive integer"),
        ({"s": 4100, "t": 8, "sequence_parallel": True}, "divide the sequence length"),
    ],
)
def test_rejects_bad_inputs(kwargs, fragment):
    args = {"s": s, "b": b, "h": h, "a": a} | kwargs
    with pytest.raises(ValueError, match=fragment) as info:
        activation_bytes_per_layer(**args)
    assert "\n" not in str(info.value)


# --- the Llama layer -----------------------------------------------------------------------------

def _llama(h=64, a=4, a_kv=2, d_ff=176, head_dim=None, **extra) -> dict:
    cfg = {"model_type": "llama", "vocab_size": 96, "hidden_size": h, "intermediate_size": d_ff,
           "num_hidden_layers": 3, "num_attention_heads": a, "num_key_value_heads": a_kv,
           "max_position_embeddings": 128, "tie_word_embeddings": False} | extra
    if head_dim is not None:
        cfg["head_dim"] = head_dim
    return cfg


def test_llama_3_8b_coefficient_by_hand():
    from infralens.models import shipped_config

    cfg = shipped_config("llama-3-8b")
    h, a, a_kv, ff = (cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
                      cfg["intermediate_size"])
    # attention 2(3 + 2 a_kv/a), eager SwiGLU 2(1 + 4 d_ff/h), two fused norms 2 + 2
    want = 2 * (3 + 2 * F(a_kv, a)) + 2 * (1 + 4 * F(ff, h)) + 4
    assert want == 41
    got = llama_activation_bytes_per_layer(cfg, s=4096, b=1)
    assert got.activations == want * got.sbh and got.coefficient == 41.0
    # the implementation choices move exactly their own terms
    assert llama_activation_bytes_per_layer(cfg, 4096, 1, swiglu="fused").coefficient == 41 - 2 * F(ff, h)
    assert llama_activation_bytes_per_layer(cfg, 4096, 1, norm="eager").coefficient == 41 + 2 * (4 + 2 - 2)


def test_llama_statistics_are_per_row_fp32():
    got = llama_activation_bytes_per_layer(_llama(), s=40, b=3)
    assert got.statistics == 4 * 40 * 3 * (2 + 4)  # two 1/rms and a=4 log-sum-exps per token
    assert got.total == got.activations + got.statistics


def test_llama_explicit_head_dim_uses_the_head_widths():
    # a * d_h = 32 != h = 64: Q and the attention output are 32 wide, K and V 2 * 8 = 16
    got = llama_activation_bytes_per_layer(_llama(head_dim=8), s=10, b=1)
    assert got.attention == 2 * 10 * (64 + 32 + 2 * 16 + 32)


@pytest.mark.parametrize(
    ("config", "kwargs", "fragment"),
    [
        ("gpt2", {}, "a Llama-style layer"),
        ("mixtral-8x7b-v0.1", {}, "with experts"),
        ("llama-3-8b", {"norm": "apex"}, "norm must be"),
        ("llama-3-8b", {"swiglu": "none"}, "swiglu must be"),
        ("llama-3-8b", {"s": 0}, "s must be a positive integer"),
    ],
)
def test_llama_rejects_bad_inputs(config, kwargs, fragment):
    from infralens.models import shipped_config

    args = {"s": 16, "b": 1} | kwargs
    with pytest.raises(ValueError, match=fragment) as info:
        llama_activation_bytes_per_layer(shipped_config(config), **args)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("shape", [{}, {"a_kv": 4}, {"head_dim": 8}, {"a_kv": 1, "d_ff": 96}],
                         ids=["gqa", "mha", "narrow-heads", "mqa"])
def test_llama_layer_is_what_hugging_face_llama_saves(shape):
    """The independent reference: a tiny bf16 LlamaForCausalLM on the CPU with SDPA, whose
    RMSNorm and SwiGLU are the eager modules (norm="eager", swiglu="eager")."""
    pytest.importorskip("transformers")
    from infralens.memory.measure import hf_llama_saved

    raw = _llama(**shape)
    s, b = 40, 3  # s * b differs from every width, so nothing is mistaken for a weight
    rows = hf_llama_saved(raw, b, s)
    want = llama_activation_bytes_per_layer(raw, s=s, b=b, norm="eager", swiglu="eager")
    # layer 0 also holds RoPE's cos/sin tables, which every layer shares; the later ones do not
    for layer in (1, 2):
        got = sum(r["bytes"] for r in rows if r["module"].startswith(f"model.layers.{layer}."))
        assert got == want.total
