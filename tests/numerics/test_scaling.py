"""Loss scaling, FP8 scaling and stochastic rounding against PyTorch's own implementations and
the algorithms' defining properties."""

from __future__ import annotations

import pytest
import torch

from infralens.numerics import scaling as S
from infralens.numerics.formats import FORMATS


def test_loss_scaler_defaults_are_gradscalers():
    theirs = torch.amp.GradScaler("cpu")
    ours = S.DynamicLossScaler()
    assert (ours.scale, ours.growth_factor, ours.backoff_factor, ours.growth_interval) == (
        theirs.get_scale(), theirs.get_growth_factor(), theirs.get_backoff_factor(),
        theirs.get_growth_interval())


def test_loss_scaler_follows_torchs_update_kernel():
    # torch._amp_update_scale_ is the kernel GradScaler.update calls: an independent reference.
    pattern = [True, True, False, False, False, True, False, False, False, False, False, False]
    scale = torch.tensor([2.0**20])
    tracker = torch.tensor([0], dtype=torch.int32)
    ours = S.DynamicLossScaler(scale=2.0**20, growth_interval=3)
    for found in pattern:
        took = ours.update(found)
        torch._amp_update_scale_(scale, tracker, torch.tensor([1.0 if found else 0.0]), 2.0, 0.5, 3)
        assert ours.scale == scale.item() and ours.clean_steps == tracker.item()
        assert took is not found


def test_scaled_training_steps_agree_with_gradscaler_and_overflow():
    from infralens.models.gpt import GPT, GPTConfig
    from infralens.training.train_single_gpu import TokenWindows, batches, markov_corpus

    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=32, n_positions=16, d_model=32, n_layers=1, n_heads=2)
    rows = S.scaled_training_steps(GPT(cfg), batches(TokenWindows(markov_corpus(4096, 32), 16), 8),
                                   steps=6, init_scale=2.0**30)
    assert rows[0]["found_inf"] and rows[0]["next_torch"] == 2.0**29
    assert all(r["next_torch"] == r["next_ours"] for r in rows)


def test_grads_out_of_range_thresholds():
    fp16 = FORMATS["fp16"]
    g = torch.tensor([fp16.min_subnormal / 4, fp16.min_subnormal, fp16.min_normal * 2, 1e5])
    assert S.grads_out_of_range(g, 1.0) == {"zero": 0.25, "subnormal": 0.25, "overflow": 0.25}
    assert S.grads_out_of_range(g, 1.0, "bf16") == {"zero": 0.0, "subnormal": 0.0, "overflow": 0.0}


def test_quantize_fp8_is_the_saturating_round_to_nearest():
    from infralens.numerics.rounding import round_to

    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4000, generator=gen) * 300           # many beyond E4M3's 448
    for dtype, key in ((torch.float8_e4m3fn, "e4m3fn"), (torch.float8_e5m2, "e5m2")):
        scale = 0.5 if key == "e4m3fn" else 400.0
        got = S.quantize_fp8(x, scale, dtype).float().tolist()
        want = [round_to(v, FORMATS[key], saturate=True) for v in (x * scale).tolist()]
        assert got == want


def test_delayed_scaling_uses_the_history_max_and_keeps_scale_on_zero():
    ds = S.DelayedScaling(fmt="e4m3fn", history_len=2, margin=1)
    ds.step(torch.tensor([10.0]))
    assert ds.scale == pytest.approx(448 / 10 / 2)
    ds.step(torch.tensor([4.0]))
    assert ds.scale == pytest.approx(448 / 10 / 2)          # 10 still in the window of 2
    ds.step(torch.tensor([2.0]))
    assert ds.scale == pytest.approx(448 / 4 / 2)           # 10 has left the window
    ds = S.DelayedScaling(fmt="e5m2", scale=3.0)
    ds.step(torch.zeros(4))
    assert ds.scale == 3.0
    q = ds.step(torch.tensor([1.0]))
    assert q.dtype == torch.float8_e5m2


def test_stochastic_rounding_picks_a_neighbour_and_is_unbiased():
    gen = torch.Generator().manual_seed(0)
    x = torch.full((200_000,), 1 + 2.0**-9)                 # a quarter of the way to the next BF16
    r = S.stochastic_round_bf16(x, gen).float()
    assert set(r.unique().tolist()) == {1.0, 1 + 2.0**-7}
    p = (r > 1).float().mean().item()
    sigma = (0.25 * 0.75 / x.numel()) ** 0.5
    assert abs(p - 0.25) < 6 * sigma
    neg = S.stochastic_round_bf16(-x, gen).float()
    assert set(neg.unique().tolist()) == {-1.0, -(1 + 2.0**-7)}
    exact = torch.tensor([1.0, 0.5, -3.0, float("inf"), float("-inf")])
    assert S.stochastic_round_bf16(exact, gen).float().tolist() == exact.tolist()
    assert torch.isnan(S.stochastic_round_bf16(torch.tensor([float("nan")]), gen)).all()
