"""RoPE: rotation, the relative-position property, the two layouts, and context extension."""

import math

import pytest
import torch

from infralens.transformer.rope import (
    apply_rope,
    interleaved_to_half,
    ntk_base,
    pi_frequencies,
    rope_decay_bound,
    rope_frequencies,
    rotated_score,
    wavelengths,
    yarn_attention_scale,
    yarn_frequencies,
    yarn_frequencies_by_index,
)
from tests.tensors import seeded_randn

rand = seeded_randn(7)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_rotation_preserves_norms_and_position_zero_is_identity(layout):
    f = rope_frequencies(32, 10_000.0)
    x = rand(3, 13, 32)
    pos = torch.arange(100, 113)
    y = apply_rope(x, pos, f, layout)
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), atol=1e-12)
    assert torch.equal(apply_rope(x, torch.zeros(13, dtype=torch.long), f, layout), x)


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_score_depends_only_on_the_offset(layout):
    f = rope_frequencies(64, 500_000.0)
    q, k = rand(64), rand(64)
    for offset in (-7, 0, 3, 1000):
        scores = [rotated_score(q, k, m, m - offset, f, layout) for m in (0, 17, 4096, 123_457)]
        assert max(scores) - min(scores) < 1e-9 * max(1.0, abs(scores[0]))
    assert abs(rotated_score(q, k, 5, 0, f, layout) - rotated_score(q, k, 0, 5, f, layout)) > 1e-6


def test_the_two_layouts_differ_by_a_permutation():
    f = rope_frequencies(16)
    x, pos = rand(2, 5, 16), torch.arange(3, 8)
    a = interleaved_to_half(apply_rope(x, pos, f, "interleaved"))
    b = apply_rope(interleaved_to_half(x), pos, f, "half")
    assert torch.allclose(a, b, atol=0, rtol=0)


def test_half_layout_matches_hugging_face():
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    f = rope_frequencies(16, 10_000.0)
    x, pos = rand(2, 4, 7, 16), torch.arange(3, 10)
    angles = pos[:, None].double() * f[None]
    emb = torch.cat([angles, angles], dim=-1)
    hf, _ = llama.apply_rotary_pos_emb(x, x, emb.cos()[None], emb.sin()[None])
    assert torch.allclose(apply_rope(x, pos, f, "half"), hf, atol=1e-14)


def test_bad_arguments():
    with pytest.raises(ValueError):
        rope_frequencies(15)
    with pytest.raises(ValueError):
        apply_rope(rand(1, 2, 4), torch.arange(2), rope_frequencies(4), "zigzag")


def test_context_extension():
    d, base, s, L = 128, 500_000.0, 4.0, 8192
    f = rope_frequencies(d, base)
    assert torch.allclose(pi_frequencies(f, s), f / s)
    f_ntk = rope_frequencies(d, ntk_base(base, d, s))
    assert f_ntk[0] == f[0] == 1.0  # the fastest pair never moves
    assert math.isclose(f_ntk[-1] / f[-1], 1 / s, rel_tol=1e-12)  # the slowest is interpolated by s
    y = yarn_frequencies(f, s, L)
    turns = L / wavelengths(f)
    assert torch.equal(y[turns > 32], f[turns > 32])  # fast pairs: kept
    assert torch.allclose(y[turns < 1], f[turns < 1] / s)  # slow pairs: interpolated like PI
    ratio = y / f
    assert torch.all(ratio[1:] <= ratio[:-1])  # the interpolation grows towards slow pairs
    assert yarn_attention_scale(1.0) == 1.0
    assert math.isclose(yarn_attention_scale(s), 0.1 * math.log(s) + 1)


def _hf_yarn(head_dim, base, factor, original):
    """Hugging Face's own YaRN frequencies for a Llama config (float32)."""
    rope_utils = pytest.importorskip("transformers.modeling_rope_utils")
    from transformers import LlamaConfig

    cfg = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, max_position_embeddings=original,
                      rope_parameters={"rope_type": "yarn", "rope_theta": base, "factor": factor,
                                       "original_max_position_embeddings": original})
    inv_freq, attention_factor = rope_utils._compute_yarn_parameters(cfg)
    return inv_freq.double(), attention_factor


@pytest.mark.parametrize(("head_dim", "base", "factor", "original"),
                         [(128, 500_000.0, 4.0, 8192), (64, 10_000.0, 8.0, 4096),
                          (128, 10_000.0, 16.0, 4096)])
def test_yarn_by_index_matches_hugging_face(head_dim, base, factor, original):
    hf, attention_factor = _hf_yarn(head_dim, base, factor, original)
    ours = yarn_frequencies_by_index(rope_frequencies(head_dim, base), factor, original)
    assert torch.allclose(ours, hf, rtol=1e-5, atol=0)
    assert math.isclose(yarn_attention_scale(factor), attention_factor, rel_tol=1e-12)


def test_yarn_ramps_differ_inside_the_ramp_and_agree_outside():
    f = rope_frequencies(128, 500_000.0)
    by_r, by_i = yarn_frequencies(f, 4.0, 8192), yarn_frequencies_by_index(f, 4.0, 8192, truncate=False)
    turns = 8192 / wavelengths(f)
    outside = (turns >= 32) | (turns <= 1)
    assert torch.allclose(by_r[outside], by_i[outside], rtol=1e-12, atol=0)
    assert (by_r[~outside] - by_i[~outside]).abs().max() > 1e-3 * f[~outside].min()
    # Both keep the fastest pair and divide the slowest by s.
    for g in (by_r, by_i):
        assert g[0] == f[0] and torch.isclose(g[-1], f[-1] / 4.0)


def test_rope_decay_bound_at_zero_and_against_a_direct_sum():
    d = 32
    f = rope_frequencies(d, 10_000.0)
    at_zero = rope_decay_bound(torch.tensor([0.0]), f)[0]
    assert torch.isclose(at_zero, torch.tensor((d / 2 + 1) / 2, dtype=torch.float64))
    for r in (1.0, 37.0, 5000.0):
        direct = sum(abs(sum(complex(math.cos(r * f[k]), math.sin(r * f[k])) for k in range(j)))
                     for j in range(1, d // 2 + 1)) / (d // 2)
        assert math.isclose(float(rope_decay_bound(torch.tensor([r]), f)[0]), direct, rel_tol=1e-12)
    # A larger base turns every pair more slowly, so the bound falls later.
    near = torch.tensor([100.0, 1000.0])
    assert (rope_decay_bound(near, rope_frequencies(d, 500_000.0)) > rope_decay_bound(near, f)).all()
