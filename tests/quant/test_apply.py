"""Quantizing a whole model: each layer's weights are what the method makes of them (checked
against ml_dtypes for FP8, against the grid for INT, against the single-layer W8A8 reference for
SmoothQuant), GPTQ calibrates sequentially and AWQ/SmoothQuant from the unquantized model, bytes
follow the effective-bits formula, perplexity is exp of the mean cross-entropy."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import torch

from infralens.models.gpt import GPT, GPTConfig
from infralens.quant import apply as A
from infralens.quant.gptq import gptq_quantize
from infralens.quant.plan import Cell
from infralens.quant.smoothing import w8a8_output


def _model(seed=0):
    torch.manual_seed(seed)
    return GPT(GPTConfig(vocab_size=64, n_positions=16, d_model=32, n_layers=2, n_heads=2)).eval()


def _tokens(seed=1, b=4, t=16):
    return torch.randint(0, 64, (b, t), generator=torch.Generator().manual_seed(seed))


def test_block_linears_in_forward_order():
    names = [n for n, _ in A.block_linears(_model())]
    assert names == [f"blocks.{i}.{m}" for i in range(2)
                     for m in ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")]


def test_fp8_rounding_matches_ml_dtypes():
    x = torch.randn(8, 40, dtype=torch.float64) * torch.logspace(-3, 2, 40, dtype=torch.float64)
    for per in ("tensor", "channel"):
        amax = x.abs().amax() if per == "tensor" else x.abs().amax(dim=1, keepdim=True)
        scale = 448.0 / amax.float().double()
        ref = (x * scale).numpy().astype(ml_dtypes.float8_e4m3fn).astype(np.float64) / scale.numpy()
        np.testing.assert_allclose(A.fp8_fake_quantize(x, per).numpy(), ref, rtol=1e-6, atol=0)
    with pytest.raises(ValueError, match="per must be"):
        A.fp8_fake_quantize(x, "group")


def test_rtn_int4_group_weights_sit_on_their_grid():
    model, group = _model(), 8
    q = A.quantize_model(model, Cell("rtn", "int4", "group"), group)
    for (_, old), (_, new) in zip(A.block_linears(model), A.block_linears(q), strict=True):
        assert isinstance(new, A.QuantLinear)
        w, wq = old.weight.double().reshape(-1, group), new.weight.double().reshape(-1, group)
        step = w.abs().amax(dim=1, keepdim=True) / 7                    # symmetric, 2^3 - 1 levels
        codes = wq / step
        assert torch.allclose(codes, codes.round(), atol=1e-4) and codes.abs().max() <= 8
        assert ((wq - w).abs() <= step / 2 + 1e-6).all()                # round to nearest
    assert model.blocks[0].attn.qkv.__class__ is torch.nn.Linear        # the original is untouched


def test_smoothquant_layer_equals_the_single_layer_reference():
    model, tokens = _model(), _tokens()
    q = A.quantize_model(model, Cell("smoothquant", "int8", "channel"), 8, tokens, alpha=0.5)
    x = A.layer_inputs(model, ["blocks.0.mlp.fc"], tokens)["blocks.0.mlp.fc"]
    layer = q.blocks[0].mlp.fc
    ref = w8a8_output(model.blocks[0].mlp.fc.weight, x, "tensor", alpha=0.5) + layer.bias.double()
    torch.testing.assert_close(layer(x.float()).double(), ref, rtol=1e-4, atol=1e-4)


def test_gptq_is_sequential_and_awq_reads_the_unquantized_model():
    model, tokens = _model(), _tokens()
    names = [n for n, _ in A.block_linears(model)]
    q = A.quantize_model(model, Cell("gptq", "int4", "channel"), 8, tokens)
    # the second layer was calibrated on what the model with the first one quantized produces
    partial = A.quantize_model(model, Cell("rtn", "int4", "channel"), 8)
    partial.blocks[0].attn.qkv.weight.copy_(q.blocks[0].attn.qkv.weight)
    for name in names[1:]:
        parent, attr = name.rsplit(".", 1)
        setattr(dict(partial.named_modules())[parent], attr, dict(model.named_modules())[name])
    x1 = A.layer_inputs(partial, [names[1]], tokens)[names[1]]
    expect = gptq_quantize(model.blocks[0].attn.proj.weight, x1, 4).float()
    torch.testing.assert_close(q.blocks[0].attn.proj.weight, expect, rtol=0, atol=1e-6)
    # AWQ's last layer: searched on the unquantized model's inputs
    x_last = A.layer_inputs(model, [names[-1]], tokens)[names[-1]]
    from infralens.quant.smoothing import awq_search
    awq = A.quantize_model(model, Cell("awq", "int4", "group"), 8, tokens)
    expect = awq_search(model.blocks[1].mlp.proj.weight.detach(), x_last, 4, 8)["weight"].float()
    torch.testing.assert_close(awq.blocks[1].mlp.proj.weight, expect, rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match="gptq needs calibration tokens"):
        A.quantize_model(model, Cell("gptq", "int4", "channel"), 8)


def test_weight_bytes_follow_the_effective_bits():
    model = _model()
    linear = sum(m.weight.numel() for _, m in A.block_linears(model))
    rest = sum(p.numel() for p in model.parameters()) - linear
    assert A.weight_bytes(model, None, 8) == 2 * (linear + rest)
    assert A.weight_bytes(model, Cell("rtn", "int4", "group"), 8) == linear * (4 + 16 / 8) / 8 + 2 * rest
    per_channel = sum(m.weight.shape[0] * (m.weight.shape[1] * 4 + 16)
                      for _, m in A.block_linears(model)) / 8
    assert A.weight_bytes(model, Cell("gptq", "int4", "channel"), 8) == per_channel + 2 * rest
    per_tensor = sum(m.weight.numel() * 8 + 32 for _, m in A.block_linears(model)) / 8
    assert A.weight_bytes(model, Cell("fp8", "e4m3", "tensor"), 8) == pytest.approx(per_tensor + 2 * rest)


def test_perplexity_of_a_model_that_knows_nothing_is_the_vocabulary():
    model = _model()
    with torch.no_grad():
        model.ln_f.weight.zero_()
        model.ln_f.bias.zero_()                                 # every logit 0: uniform
    tokens = torch.randint(0, 64, (16 * 5 + 3,))
    assert A.perplexity(model, tokens, 16, batch=2) == pytest.approx(64)
    with pytest.raises(ValueError, match="no window"):
        A.perplexity(model, tokens[:10], 16)


def test_perplexity_is_exp_of_the_models_own_loss():
    model, tokens = _model(), torch.randint(0, 64, (16 * 3 + 1,))
    x = tokens[:-1].reshape(3, 16)
    y = tokens[1:].reshape(3, 16)
    with torch.no_grad():
        loss = model(x, y)[1]
    assert A.perplexity(model, tokens, 16) == pytest.approx(math.exp(float(loss)), rel=1e-5)


def test_paired_change_is_the_perplexity_ratio_with_its_sampling_error():
    model, tokens = _model(), torch.randint(0, 64, (16 * 40 + 1,))
    ref = A.window_losses(model, tokens, 16)
    assert ref.shape == (40,)
    assert math.exp(float(ref.mean())) == pytest.approx(A.perplexity(model, tokens, 16))
    other = A.quantize_model(model, Cell("rtn", "int4", "channel"), 8)
    change, se = A.paired_change(A.window_losses(other, tokens, 16), ref)
    ratio = A.perplexity(other, tokens, 16) / A.perplexity(model, tokens, 16)
    assert change == pytest.approx(100 * (ratio - 1))
    assert se > 0
    assert A.paired_change(ref + 0.01, ref) == pytest.approx((100 * (math.exp(0.01) - 1), 0.0))
    # the same differences seen four times as often: the error halves
    d = torch.randn(50, dtype=torch.float64) * 0.01
    se1 = A.paired_change(ref[:1].repeat(50) + d, ref[:1].repeat(50))[1]
    se4 = A.paired_change((ref[:1].repeat(50) + d).repeat(4), ref[:1].repeat(200))[1]
    assert se4 == pytest.approx(se1 / 2, rel=0.02)


def test_paired_change_over_blocks_of_windows():
    gen = torch.Generator().manual_seed(3)
    ref = torch.rand(64, generator=gen, dtype=torch.float64)
    d = torch.randn(64, generator=gen, dtype=torch.float64) * 0.01
    per_window = A.paired_change(ref + d, ref)
    assert A.paired_change(ref + d, ref, blocks=64) == pytest.approx(per_window)   # blocks of one
    change, se = A.paired_change(ref + d, ref, blocks=8)
    means = d.reshape(8, 8).mean(dim=1)
    assert change == pytest.approx(per_window[0])
    assert se == pytest.approx(100 * math.exp(float(d.mean())) * float(means.std()) / math.sqrt(8))
