"""Megatron-LM's closed forms against an independent count and the papers' own numbers."""

from fractions import Fraction

import pytest

from infralens.memory import count_parameters
from infralens.memory.params import final_norm_params
from infralens.models import load_config, shipped_config
from infralens.parallel import megatron_params, mfu, palm_flops_per_token, training_days, training_flops
from infralens.parallel.plan import gpt_shape
from infralens.parallel.published import MEGATRON_SEQ, MEGATRON_TABLE1, MEGATRON_VOCAB
from infralens.transformer.flops import forward_flops_per_token, palm_training_flops_per_token


@pytest.mark.parametrize("run", MEGATRON_TABLE1, ids=lambda r: f"{r.params_billion}B")
def test_eq2_matches_table1_and_the_layer_by_layer_count(run):
    p = megatron_params(run.layers, run.hidden, MEGATRON_VOCAB, MEGATRON_SEQ)
    assert f"{p / 1e9:.1f}" == f"{run.params_billion:.1f}"
    shape = gpt_shape(run.layers, run.hidden, run.heads)
    # Eq. (2) leaves out only the final LayerNorm, which Lab 01's count includes
    assert count_parameters(shape).total - final_norm_params(shape) == p


@pytest.mark.parametrize("b,s,l,h,V", [(4, 2048, 24, 2304, 51200), (1, 8192, 80, 8192, 128256),
                                       (3, 100, 7, 96, 1000)])
def test_training_flops_against_the_per_token_count(b, s, l, h, V):
    shape = gpt_shape(l, h, h // 64 if h % 64 == 0 else 1, vocab=V, seq=s)
    fwd = forward_flops_per_token(shape, s)  # non-causal: every query sees all s keys
    biases = 2 * l * 9 * h  # Megatron's formulas count no bias FLOPs; the per-token count does
    layer_fwd = fwd.projections + fwd.mlp + fwd.attention - biases
    tokens = b * s
    assert training_flops(b, s, l, h, V, "none") == 3 * tokens * (layer_fwd + fwd.lm_head)
    assert training_flops(b, s, l, h, V, "full") == tokens * (4 * layer_fwd + 3 * fwd.lm_head)
    assert training_flops(b, s, l, h, V, "selective") == 3 * tokens * (layer_fwd + fwd.lm_head) \
        + 3 * tokens * fwd.attention  # Eq. (8): the attention term counted twice


def test_closed_forms_as_printed():
    B, s, l, h, V = 8, 2048, 96, 12288, 51200
    eq7 = 72 * B * s * l * h * h * (1 + Fraction(s, 6 * h) + Fraction(V, 12 * l * h))
    eq8 = 72 * B * s * l * h * h * (1 + Fraction(s, 3 * h) + Fraction(V, 12 * l * h))
    eq3 = 96 * B * s * l * h * h * (1 + Fraction(s, 6 * h) + Fraction(V, 16 * l * h))
    assert training_flops(B, s, l, h, V, "none") == eq7
    assert training_flops(B, s, l, h, V, "selective") == eq8
    assert training_flops(B, s, l, h, V, "full") == eq3


def test_training_days_reproduces_the_papers_estimates():
    # Narayanan et al. section 5.1: GPT-3 175B on 300B tokens, 1024 GPUs at 140 TFLOP/s: 34 days;
    # 1T on 450B tokens, 3072 GPUs at 163 TFLOP/s: 84 days.
    assert round(training_days(300e9, 175e9, 1024, 140e12)) == 34
    one_t = megatron_params(128, 25600, 51200, 2048)
    assert round(training_days(450e9, one_t, 3072, 163e12)) == 84


def test_mfu_is_model_flops_over_owned_peak():
    assert mfu(1000.0, 6e9, 4, 1e12) == pytest.approx(1000 * 6e9 / 4e12)
    assert mfu(0.0, 1.0, 1, 1.0) == 0.0
    with pytest.raises(ValueError):
        mfu(1.0, 1.0, 0, 1.0)


def test_palm_formula_matches_the_config_version():
    shape = load_config(shipped_config("llama-3-8b"))
    n = count_parameters(shape).total
    assert palm_flops_per_token(n, 32, 32, 128, 8192) == palm_training_flops_per_token(shape, 8192)
    assert palm_flops_per_token(n, 32, 32, 128, 8192) == 6 * n + 12 * 32 * 32 * 128 * 8192


@pytest.mark.parametrize("bad", [{"recompute": "partial"}, {"batch": 0}, {"batch": True}])
def test_bad_input(bad):
    args = {"batch": 1, "seq": 2, "layers": 1, "hidden": 4, "vocab": 8} | bad
    with pytest.raises(ValueError):
        training_flops(**args)
