"""The memory knobs against independent references: the analytic sizes of what SDPA saves, the plain
model's gradients, ``torch.optim.AdamW`` run directly, the ATen operators a recomputing backward
dispatches, and diffusers' own decode."""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch
from torch.testing import assert_close

from infralens.dispatch.keys import AtenLog
from infralens.memory.knobs import (
    ATTENTION_BACKENDS,
    OFFLOADS,
    RECOMPUTE,
    SD_VAE,
    HostAdamW,
    Recomputed,
    attention_case,
    autoencoder,
    inference_case,
    offload_blocks,
    peak,
    training_case,
    vae_decode_case,
    variable_length_case,
    with_recompute,
)
from infralens.models.gpt import GPT, GPTConfig

CFG = GPTConfig(vocab_size=128, n_positions=64, d_model=64, n_layers=2, n_heads=4)
# A two-block AutoencoderKL: one 2x upsampling between its two decoder blocks.
TINY_VAE = {"block_out_channels": (32, 64), "layers_per_block": 1, "latent_channels": 4,
            "down_block_types": ("DownEncoderBlock2D",) * 2, "up_block_types": ("UpDecoderBlock2D",) * 2,
            "sample_size": 32}
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def gpt(seed: int = 0, cfg: GPTConfig = CFG) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg)


def tokens(batch: int = 2, seq: int = 16, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, CFG.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed))


def gpt_params(cfg: GPTConfig) -> int:
    """GPT-2's parameter count by hand: tied embeddings, position table, 12C^2 + 13C a block, ln_f."""
    c = cfg.d_model
    return cfg.vocab_size * c + cfg.n_positions * c + cfg.n_layers * (12 * c * c + 13 * c) + 2 * c


# ---------------------------------------------------------------------------- peak


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")])
def test_peak_off_cuda_is_none_and_runs_fn_once(device):
    calls = []
    assert peak(lambda: calls.append(1), device) is None
    assert calls == [1]


@cuda
def test_peak_on_cuda_counts_a_freed_tensor_and_not_what_came_before():
    n = 3 * 2**20  # 12 MiB of float32: a multiple of the allocator's 2 MiB rounding
    held = torch.empty(8 * n, device="cuda")  # allocated before: not part of the peak
    got = peak(lambda: torch.ones(n, device="cuda").sum(), "cuda")
    assert 4 * n <= got < 4 * n + 2**20
    del held


# ---------------------------------------------------------------------------- attention backend


def test_attention_backends_reject_an_unknown_name():
    with pytest.raises(ValueError, match="backend must be one of"):
        attention_case("sparse", 1, 1, 8, 8, device="cpu", time=False)


@pytest.mark.parametrize("backend", ["math", "flash"])
def test_attention_saved_bytes_on_cpu(backend):
    # CPU float32: math keeps the (b, a, s, s) probabilities; flash keeps the output and one
    # log-sum-exp per row, both besides q, k and v.
    b, a, s, d, f32 = 2, 3, 24, 8, 4
    got = attention_case(backend, b, a, s, d, device="cpu", dtype=torch.float32, time=False)
    assert got["inputs"] == 3 * b * a * s * d * f32
    extra = {"math": b * a * s * s * f32, "flash": b * a * s * d * f32 + b * a * s * f32}[backend]
    assert got["saved"] - got["inputs"] == extra
    assert (got["backend"], got["dtype"], got["peak"], got["ms"]) == (backend, "float32", None, None)
    assert ATTENTION_BACKENDS == ("math", "efficient", "flash")


@cuda
def test_attention_saved_bytes_on_cuda_flash_bf16():
    b, a, s, d = 2, 4, 256, 64
    got = attention_case("flash", b, a, s, d, device="cuda", time=False)
    assert got["inputs"] == 3 * b * a * s * d * 2
    # bf16 output and fp32 log-sum-exp, plus the CUDA kernel's dropout RNG seed and offset (scalars)
    extra = got["saved"] - got["inputs"] - (b * a * s * d * 2 + b * a * s * 4)
    assert 0 <= extra <= 64
    math_ = attention_case("math", b, a, s, d, device="cuda", time=False)
    assert math_["saved"] - math_["inputs"] >= b * a * s * s * 2  # the bf16 probabilities at least
    assert math_["peak"] > got["peak"] > 0


# ---------------------------------------------------------------------------- recomputation


def test_recompute_modes_are_checked():
    with pytest.raises(ValueError, match="recompute must be one of"):
        with_recompute(gpt(), "partial")
    with pytest.raises(ValueError, match="mode must be 'selective' or 'full'"):
        Recomputed(torch.nn.Linear(2, 2), "none")
    assert RECOMPUTE == ("none", "selective", "full")


def test_with_recompute_none_leaves_the_blocks_alone():
    model = gpt()
    blocks = list(model.blocks)
    assert with_recompute(model, "none") is model
    assert list(model.blocks) == blocks and not any(isinstance(b, Recomputed) for b in model.blocks)


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_with_recompute_wraps_each_block(mode):
    model = gpt()
    blocks = list(model.blocks)
    assert with_recompute(model, mode) is model
    assert [type(b) for b in model.blocks] == [Recomputed] * CFG.n_layers
    assert [b.block for b in model.blocks] == blocks and {b.mode for b in model.blocks} == {mode}


def _grads(model: GPT, x: torch.Tensor) -> dict[str, torch.Tensor]:
    torch.manual_seed(7)  # the dropout masks
    _, loss = model(x, x)
    loss.backward()
    return {n.replace(".block.", "."): p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("mode", ["full", "selective"])
def test_recomputation_gives_the_plain_models_gradients(mode):
    # Dropout on: the recomputed forward must replay the same masks (checkpoint restores the RNG).
    cfg = GPTConfig(vocab_size=128, n_positions=64, d_model=64, n_layers=2, n_heads=4, dropout=0.1)
    x = tokens()
    expected = _grads(gpt(cfg=cfg), x)
    got = _grads(with_recompute(gpt(cfg=cfg), mode), x)
    assert got.keys() == expected.keys()
    for name, grad in expected.items():
        assert_close(got[name], grad, rtol=1e-6, atol=1e-8, msg=name)


def _aten_counts(mode: str) -> Counter:
    model = with_recompute(gpt(), mode)
    x = tokens()
    with AtenLog() as log:
        _, loss = model(x, x)
        loss.backward()
    return Counter(name for name, _ in log.calls)


def test_recompute_policies_rerun_what_they_say():
    addmm, gelu = "aten.addmm.default", "aten.gelu.default"
    sdpa = "aten._scaled_dot_product_flash_attention_for_cpu.default"
    none, selective, full = (_aten_counts(m) for m in ("none", "selective", "full"))
    layers = CFG.n_layers
    # Four biased Linears a block (qkv, attn.proj, fc, mlp.proj), one GELU and one SDPA.
    assert (none[addmm], none[gelu], none[sdpa]) == (4 * layers, layers, layers)
    # Selective: the matmuls' and attention's outputs are kept, the GELU reruns in backward.
    assert (selective[addmm], selective[sdpa]) == (none[addmm], none[sdpa])
    assert selective[gelu] == 2 * none[gelu]
    # Full: the block reruns; non-reentrant checkpointing may stop before the last matmul, whose
    # output nothing in backward needs, so 3 or 4 more addmm a block.
    assert 3 * layers <= full[addmm] - none[addmm] <= 4 * layers
    assert (full[gelu], full[sdpa]) == (2 * none[gelu], 2 * none[sdpa])


# ---------------------------------------------------------------------------- HostAdamW

ADAMW = {"lr": 1e-2, "betas": (0.8, 0.95), "eps": 1e-6, "weight_decay": 0.1}


def test_host_adamw_matches_torch_adamw_bit_for_bit():
    ours, ref = gpt(), gpt()
    opt, ref_opt = HostAdamW(ours.parameters(), **ADAMW), torch.optim.AdamW(ref.parameters(), **ADAMW)
    for step in range(4):
        x = tokens(seed=10 + step)
        for model, o in ((ours, opt), (ref, ref_opt)):
            model(x, x)[1].backward()
            o.step()
            o.zero_grad(set_to_none=True)
    moved, initial = 0, gpt()
    for (name, p), q in zip(ours.named_parameters(), ref.parameters(), strict=True):
        assert torch.equal(p, q), name
        moved += not torch.equal(p, initial.get_parameter(name))
    assert moved == len(opt.params)  # every parameter was updated


def test_host_adamw_keeps_an_fp32_master_of_bf16_parameters():
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 8).to(torch.bfloat16)
    master = [p.detach().float().clone().requires_grad_() for p in lin.parameters()]
    opt, ref = HostAdamW(lin.parameters(), **ADAMW), torch.optim.AdamW(master, **ADAMW)
    assert [h.dtype for h in opt.host] == [torch.float32, torch.float32]
    for step in range(3):
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(step)).to(torch.bfloat16)
        lin(x).square().sum().backward()
        for m, p in zip(master, lin.parameters(), strict=True):
            m.grad = p.grad.float()
        opt.step()
        ref.step()
        opt.zero_grad()
    for h, m, p in zip(opt.host, master, lin.parameters(), strict=True):
        assert torch.equal(h, m)  # the master moves by fp32 steps, not bf16 ones
        assert p.dtype == torch.bfloat16 and torch.equal(p, m.to(torch.bfloat16))


def test_host_adamw_skips_frozen_parameters_and_zeroes_grads():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
    model[0].weight.requires_grad_(False)
    opt = HostAdamW(model.parameters())
    assert [id(p) for p in opt.params] == [id(model[0].bias), id(model[1].weight), id(model[1].bias)]
    assert all(h.data_ptr() != p.data_ptr() for h, p in zip(opt.host, opt.params, strict=True))
    model(torch.ones(2, 4)).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in opt.params)
    opt.zero_grad(set_to_none=True)
    assert all(p.grad is None for p in opt.params)


# ---------------------------------------------------------------------------- offload_blocks


def test_offload_blocks_on_cpu_restores_the_host_copies_each_forward():
    model, ref = gpt().eval(), gpt().eval()
    first = model.blocks[0].attn.qkv.weight
    original = first.detach().clone(), first.data_ptr()
    handles = offload_blocks(model, "cpu")
    assert len(handles) == 2 * CFG.n_layers
    assert first.data_ptr() != original[1] and torch.equal(first, original[0])  # a copy
    x = tokens()
    with torch.no_grad():
        for p in model.blocks.parameters():
            p.data = torch.zeros_like(p)  # only the hooks can undo this
        assert_close(model(x)[0], ref(x)[0], rtol=0, atol=0)
        for p, q in zip(model.blocks.parameters(), ref.blocks.parameters(), strict=True):
            assert p.device.type == "cpu" and torch.equal(p, q)
        for h in handles:
            h.remove()
        for p in model.blocks.parameters():
            p.data = torch.zeros_like(p)
        assert not torch.equal(model(x)[0], ref(x)[0])  # hooks gone: the zeros stay


@cuda
def test_offload_blocks_on_cuda_streams_one_block_at_a_time():
    model, ref = gpt().cuda().eval(), gpt().cuda().eval()
    handles = offload_blocks(model, "cuda")
    where = []
    for block in model.blocks:
        block.attn.register_forward_pre_hook(
            lambda *_: where.append([next(b.parameters()).device.type for b in model.blocks]))
    x = tokens().cuda()
    with torch.no_grad():
        assert_close(model(x)[0], ref(x)[0])
    assert where == [["cuda", "cpu"], ["cpu", "cuda"]]
    assert all(p.device.type == "cpu" and p.is_pinned() for p in model.blocks.parameters())
    for h in handles:
        h.remove()


# ---------------------------------------------------------------------------- training_case


def test_training_case_rejects_an_unknown_offload():
    with pytest.raises(ValueError, match="offload must be one of"):
        training_case(CFG, 1, 8, offload="weights", device="cpu", time=False)
    assert OFFLOADS == ("none", "activations", "optimizer")


def test_training_case_on_cpu():
    b, s = 2, 16
    got = training_case(CFG, b, s, device="cpu", time=False)
    assert (got["peak"], got["phase_peaks"], got["resident"], got["saved"], got["ms"]) == (None,) * 5
    assert got["params"] == gpt_params(CFG)
    assert len(got["losses"]) == 2 and all(type(v) is float for v in got["losses"])
    # The first loss, computed here: same seed, same tokens, CPU autocast to bf16.
    model = gpt()
    gen = torch.Generator().manual_seed(0)
    x, y = (torch.randint(0, CFG.vocab_size, (b, s), generator=gen) for _ in range(2))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        first = float(model(x, y)[1])
    assert got["losses"][0] == pytest.approx(first, rel=1e-6)
    assert abs(first - math.log(CFG.vocab_size)) < 0.1  # small init: nearly uniform logits
    assert got["losses"][1] < got["losses"][0]  # one AdamW step on the same batch


@pytest.mark.parametrize(("recompute", "offload"), [("selective", "none"), ("full", "none"),
                                                    ("none", "activations"), ("none", "optimizer"),
                                                    ("full", "optimizer")])
def test_training_case_knobs_do_not_change_the_losses(recompute, offload):
    base = training_case(CFG, 2, 16, device="cpu", time=False)["losses"]
    got = training_case(CFG, 2, 16, recompute=recompute, offload=offload, device="cpu", time=False)
    assert (got["recompute"], got["offload"]) == (recompute, offload)
    assert got["losses"] == pytest.approx(base, rel=1e-6)


@cuda
def test_training_case_on_cuda_moves_the_state_it_names():
    cfg = GPTConfig(vocab_size=256, n_positions=256, d_model=128, n_layers=2, n_heads=4)
    # The first steps in a process leave cuBLAS's workspaces allocated (one more once full
    # recomputation has rerun matmuls in backward): take them before the runs compared.
    training_case(cfg, 4, 256, recompute="full", time=False)
    runs = {(r, o): training_case(cfg, 4, 256, recompute=r, offload=o, time=False)
            for r, o in [("none", "none"), ("selective", "none"), ("full", "none"), ("none", "optimizer"),
                         ("none", "activations")]}
    n = gpt_params(cfg)
    base = runs[("none", "none")]
    tensors = len(list(gpt(cfg=cfg).parameters()))
    # Resident: fp32 weights and AdamW's two moments (and cuBLAS's workspaces, in both runs).
    assert base["resident"] >= 12 * n and runs[("none", "optimizer")]["resident"] >= 4 * n
    # HostAdamW keeps the moments on the host: each tensor rounded up to the allocator's 512 bytes.
    moments = base["resident"] - runs[("none", "optimizer")]["resident"]
    assert 8 * n <= moments <= 8 * n + 2 * 512 * tensors
    saved = [runs[(r, "none")]["saved"] for r in ("none", "selective", "full")]
    assert saved[0] > saved[1] > saved[2] > 0
    assert runs[("none", "activations")]["saved"] < saved[0] / 100  # save_on_cpu: kept on the host
    for run in runs.values():
        assert run["phase_peaks"]["backward"] >= 4 * n  # the fp32 gradients
        assert run["peak"] == max(run["phase_peaks"].values())
        assert run["losses"] == pytest.approx(base["losses"], rel=1e-2)


# ---------------------------------------------------------------------------- inference_case


def test_inference_case_offload_gives_the_same_logits_on_cpu():
    b, s = 2, 16
    plain = inference_case(CFG, b, s, device="cpu", time=False)
    streamed = inference_case(CFG, b, s, offload=True, device="cpu", time=False)
    model = gpt().to(torch.bfloat16).eval()
    x = torch.randint(0, CFG.vocab_size, (b, s), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        expected = float(model(x)[0].float().sum())
    assert plain["logits_sum"] == streamed["logits_sum"] == pytest.approx(expected, rel=1e-6)
    assert (plain["offload"], streamed["offload"]) == (False, True)
    assert (plain["peak"], streamed["peak"], streamed["resident"]) == (None, None, None)


@cuda
def test_inference_case_offload_frees_the_block_weights_on_cuda():
    cfg = GPTConfig(vocab_size=256, n_positions=128, d_model=256, n_layers=4, n_heads=4)
    plain = inference_case(cfg, 2, 64, time=False)
    streamed = inference_case(cfg, 2, 64, offload=True, time=False)
    blocks = list(gpt(cfg=cfg).blocks.parameters())
    block_bytes = 2 * sum(p.numel() for p in blocks)  # bf16
    assert block_bytes <= plain["resident"] - streamed["resident"] <= block_bytes + 512 * len(blocks)
    assert streamed["logits_sum"] == pytest.approx(plain["logits_sum"], rel=1e-3)


# ---------------------------------------------------------------------------- allocator


def test_variable_length_case_needs_cuda():
    with pytest.raises(ValueError, match="needs a CUDA device"):
        variable_length_case(CFG, 1, [8, 16], expandable=True, device="cpu")


@cuda
@pytest.mark.parametrize("expandable", [False, True])
def test_variable_length_case_peak_holds_weights_grads_and_moments(expandable):
    got = variable_length_case(CFG, 2, [16, 48, 32], expandable=expandable)
    assert got["expandable"] is expandable and got["seqs"] == [16, 48, 32]
    assert got["peak_reserved"] >= got["peak_allocated"] >= 16 * gpt_params(CFG)  # 4 fp32 copies


# ---------------------------------------------------------------------------- VAE decode


def test_vae_decode_rejects_an_unknown_mode():
    with pytest.raises(ValueError, match="mode must be 'none', 'tiling' or 'slicing'"):
        vae_decode_case("chunked", 1, 8, device="cpu", config=TINY_VAE, time=False)


@pytest.mark.parametrize("mode", ["none", "tiling", "slicing"])
def test_vae_decode_case_image_size_and_weights(mode):
    latent = 24  # past the tiny VAE's 16-latent tile, so tiling does tile
    got = vae_decode_case(mode, 2, latent, device="cpu", dtype=torch.float32, config=TINY_VAE, time=False)
    factor = 2 ** (len(TINY_VAE["block_out_channels"]) - 1)  # one 2x upsampler between blocks
    assert factor == 2 and got["image"] == [factor * latent] * 2
    vae = autoencoder(TINY_VAE)
    assert got["weights"] == 4 * sum(p.numel() for p in vae.parameters())
    # decode() leaves the encoder and its quant_conv out
    encoding = 4 * sum(p.numel() for p in [*vae.encoder.parameters(), *vae.quant_conv.parameters()])
    assert 0 < got["decoder_weights"] == got["weights"] - encoding
    assert (got["mode"], got["batch"], got["latent"], got["peak"], got["ms"]) == (mode, 2, latent, None, None)


def test_vae_decode_case_weights_follow_the_dtype():
    got = vae_decode_case("none", 1, 8, device="cpu", dtype=torch.bfloat16, config=TINY_VAE, time=False)
    assert got["weights"] == 2 * sum(p.numel() for p in autoencoder(TINY_VAE).parameters())


def test_sd_vae_upsamples_8x():
    # Stable Diffusion's VAE built by diffusers on the meta device (no memory): 4 latent channels
    # in, 8x the latent's side out, as diffusers' own vae_scale_factor 2 ** (blocks - 1) says.
    from diffusers import AutoencoderKL

    assert 2 ** (len(SD_VAE["block_out_channels"]) - 1) == 8 == 2 ** (len(SD_VAE["up_block_types"]) - 1)
    with torch.device("meta"):
        vae = AutoencoderKL(**SD_VAE)
        image = vae.decode(torch.empty(1, SD_VAE["latent_channels"], 8, 6)).sample
    assert image.shape == (1, 3, 64, 48)


def test_autoencoder_is_seeded_eval_and_cast():
    a, b = autoencoder(TINY_VAE), autoencoder(TINY_VAE, seed=0)
    c = autoencoder(TINY_VAE, seed=1, dtype=torch.bfloat16)
    assert not a.training and {p.dtype for p in a.parameters()} == {torch.float32}
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    assert {p.dtype for p in c.parameters()} == {torch.bfloat16}
    assert not torch.equal(a.decoder.conv_in.weight.to(torch.bfloat16), c.decoder.conv_in.weight)


def test_slicing_matches_the_plain_decode_and_tiling_blends():
    vae = autoencoder(TINY_VAE)
    z = torch.randn(3, 4, 24, 24, generator=torch.Generator().manual_seed(0))
    small = z[:, :, :8, :8]  # within one tile
    with torch.inference_mode():
        plain, plain_small = vae.decode(z).sample, vae.decode(small).sample
        vae.enable_slicing()
        sliced = vae.decode(z).sample
        one_by_one = torch.cat([vae.decode(z[i:i + 1]).sample for i in range(3)])
        vae.disable_slicing()
        vae.enable_tiling()
        tiled, tiled_small = vae.decode(z).sample, vae.decode(small).sample
    assert_close(sliced, plain)
    assert torch.equal(sliced, one_by_one)  # slicing is the batch decoded one image at a time
    assert tiled.shape == plain.shape == (3, 3, 48, 48)
    assert not torch.allclose(tiled, plain, atol=1e-3)  # tiles decoded apart and blended
    assert torch.equal(tiled_small, plain_small)  # a latent within one tile is decoded whole
