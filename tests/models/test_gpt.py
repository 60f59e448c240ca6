"""The GPT-2 reference model: parameter count, shapes, causality, checkpointing."""

from __future__ import annotations

import pytest
import torch

from infralens.models.gpt import GPT, GPTConfig

TINY = GPTConfig(vocab_size=97, n_positions=16, d_model=32, n_layers=2, n_heads=4)


def closed_form_params(V: int, P: int, d: int, L: int, *, tied: bool = True) -> int:
    """GPT-2 with biases, d_ff = 4d.

    Per layer: QKV 3d^2 + 3d, attn proj d^2 + d, MLP 4d^2 + 4d and 4d^2 + d,
    two LayerNorms 4d  ->  12d^2 + 13d. Plus token (V d) and position (P d) embeddings,
    the final LayerNorm (2d) and, if untied, an LM head (V d).
    """
    return V * d + P * d + L * (12 * d * d + 13 * d) + 2 * d + (0 if tied else V * d)


def test_closed_form_matches_published_gpt2_small():
    assert closed_form_params(V=50257, P=1024, d=768, L=12) == 124_439_808


@pytest.mark.parametrize(
    "cfg",
    [
        GPTConfig(vocab_size=50257),  # GPT-2 small
        GPTConfig(),  # GPT-2 small with the padded 50304 vocab
        GPTConfig.gpt2_1b(),
        GPTConfig(vocab_size=97, n_positions=16, d_model=32, n_layers=3, n_heads=4,
                  tie_embeddings=False),
    ],
    ids=["gpt2-small", "gpt2-small-padded", "gpt2-1b", "tiny-untied"],
)
def test_param_count_matches_closed_form(cfg):
    with torch.device("meta"):  # shapes only, no memory
        model = GPT(cfg)
    expected = closed_form_params(
        cfg.vocab_size, cfg.n_positions, cfg.d_model, cfg.n_layers, tied=cfg.tie_embeddings
    )
    assert model.num_params() == expected


def test_gpt2_1b_preset():
    cfg = GPTConfig.gpt2_1b()
    assert closed_form_params(cfg.vocab_size, cfg.n_positions, cfg.d_model, cfg.n_layers) == (
        1_114_386_432
    )


def test_config_defaults_and_hf_dict():
    cfg = GPTConfig()
    assert cfg.ff_dim == 4 * cfg.d_model and cfg.head_dim == 64
    hf = cfg.to_hf_config()
    assert hf["model_type"] == "gpt2"
    assert (hf["n_embd"], hf["n_layer"], hf["n_head"], hf["n_inner"]) == (768, 12, 12, 3072)
    assert (hf["vocab_size"], hf["n_positions"], hf["tie_word_embeddings"]) == (50304, 1024, True)
    with pytest.raises(ValueError):
        GPTConfig(bias=False).to_hf_config()
    with pytest.raises(ValueError):
        GPTConfig(d_model=100, n_heads=12)


def test_book_parameter_counter_agrees():
    memory = pytest.importorskip("infralens.memory")
    count = getattr(memory, "count_parameters", None)
    if count is None:
        pytest.skip("infralens.memory.count_parameters not available yet")
    for cfg in (GPTConfig(), GPTConfig.gpt2_1b(), TINY):
        with torch.device("meta"):
            n = GPT(cfg).num_params()
        result = count(cfg.to_hf_config())
        total = result if isinstance(result, int) else getattr(result, "total", None)
        if total is None and isinstance(result, dict):
            total = result.get("total")
        assert total == n, (cfg, result)


def test_same_function_as_hf_gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=97, n_positions=16, d_model=32, n_layers=2, n_heads=4, d_ff=48)
    ours = GPT(cfg).double().eval()
    hf_kwargs = {k: v for k, v in cfg.to_hf_config().items() if k != "model_type"}
    hf_cfg = transformers.GPT2Config(**hf_kwargs, bos_token_id=0, eos_token_id=0)
    hf = transformers.GPT2LMHeadModel(hf_cfg).double().eval()
    assert sum(p.numel() for p in hf.parameters()) == ours.num_params()
    # HF's Conv1D stores (in, out); nn.Linear stores (out, in).
    names = {"ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj",
             "mlp.fc": "mlp.c_fc", "mlp.proj": "mlp.c_proj"}
    sd = {"transformer.wte.weight": ours.wte.weight, "transformer.wpe.weight": ours.wpe.weight,
          "transformer.ln_f.weight": ours.ln_f.weight, "transformer.ln_f.bias": ours.ln_f.bias}
    for i, blk in enumerate(ours.blocks):
        for mine, theirs in names.items():
            mod = blk.get_submodule(mine)
            conv = not mine.startswith("ln")
            sd[f"transformer.h.{i}.{theirs}.weight"] = mod.weight.t() if conv else mod.weight
            sd[f"transformer.h.{i}.{theirs}.bias"] = mod.bias
    missing, _ = hf.load_state_dict({k: v.detach().clone() for k, v in sd.items()}, strict=False)
    assert [k for k in missing if k != "lm_head.weight"] == []
    idx = torch.randint(0, cfg.vocab_size, (2, 16))
    with torch.no_grad():
        ref = hf(idx).logits
        got, _ = ours(idx)
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-10)


def test_forward_shapes_and_tying():
    model = GPT(TINY)
    assert model.lm_head.weight is model.wte.weight
    idx = torch.randint(0, TINY.vocab_size, (3, 11))
    logits, loss = model(idx)
    assert logits.shape == (3, 11, TINY.vocab_size) and loss is None
    logits, loss = model(idx, idx)
    assert loss.shape == () and torch.isfinite(loss)
    with pytest.raises(ValueError):
        model(torch.zeros(1, TINY.n_positions + 1, dtype=torch.long))


def test_causal():
    torch.manual_seed(0)
    model = GPT(TINY).double().eval()
    idx = torch.randint(0, TINY.vocab_size, (2, 12))
    changed = idx.clone()
    t = 7
    changed[:, t] = (changed[:, t] + 1) % TINY.vocab_size  # alter one "future" token
    with torch.no_grad():
        a, _ = model(idx)
        b, _ = model(changed)
    torch.testing.assert_close(a[:, :t], b[:, :t], rtol=0, atol=0)  # the past cannot see it
    assert not torch.allclose(a[:, t:], b[:, t:])  # from position t on, it matters


def test_checkpoint_same_loss_and_grads():
    torch.manual_seed(0)
    plain = GPT(TINY).double()
    ckpt = GPT(TINY, checkpoint=True).double()
    ckpt.load_state_dict(plain.state_dict())
    idx = torch.randint(0, TINY.vocab_size, (2, 16))
    tgt = torch.randint(0, TINY.vocab_size, (2, 16))
    _, loss_a = plain(idx, tgt)
    _, loss_b = ckpt(idx, tgt)
    loss_a.backward()
    loss_b.backward()
    torch.testing.assert_close(loss_a, loss_b, rtol=0, atol=0)
    for (name, pa), (_, pb) in zip(plain.named_parameters(), ckpt.named_parameters(), strict=True):
        torch.testing.assert_close(pa.grad, pb.grad, rtol=1e-12, atol=1e-12, msg=name)
