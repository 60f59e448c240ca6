"""Memory knobs: which state each one moves, shrinks or recomputes, and what it costs in time.

Each ``*_case`` function runs one workload with one knob setting and returns a plain dict with
``peak`` (bytes above what was allocated before the call, read from the CUDA caching allocator;
``None`` on the CPU) and ``ms`` (time per call, :func:`infralens.tools.bench.bench`), plus what
the knob acts on. The knobs and the state they touch:

* **attention backend** (:func:`attention_case`): SDPA's math path computes the ``(b, a, s, s)``
  probabilities and saves them for backward; the memory-efficient and flash kernels save only
  q, k, v, the output and one log-sum-exp per row (and, on CUDA, a few bytes of dropout seed),
  and recompute the probabilities in backward.
* **recompute** (:func:`with_recompute`, :func:`training_case`): ``"full"`` keeps only each
  block's input and reruns the block in backward; ``"selective"`` keeps the outputs of the
  matmuls and of attention and recomputes the cheap elementwise ops around them.
* **offload** (:class:`HostAdamW`, :func:`offload_blocks`, ``training_case(offload=...)``): the
  optimizer's moments, the saved activations or the weights live in pinned host memory and
  cross PCIe when needed.
* **allocator** (:func:`variable_length_case`): ``expandable_segments`` against the default on
  training steps whose sequence length changes from step to step.
* **VAE tiling and slicing** (:func:`vae_decode_case`): a diffusion VAE decodes the latent in
  overlapping tiles, or the batch one image at a time.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from infralens.memory.measure import saved_bytes
from infralens.models.gpt import GPT, GPTConfig
from infralens.tools.bench import bench

__all__ = ["ATTENTION_BACKENDS", "OFFLOADS", "RECOMPUTE", "HostAdamW", "Recomputed", "attention_case",
           "autoencoder", "inference_case", "offload_blocks", "peak", "training_case", "variable_length_case",
           "vae_decode_case", "with_recompute"]

RECOMPUTE = ("none", "selective", "full")
OFFLOADS = ("none", "activations", "optimizer")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak(fn: Callable[[], object], device: str | torch.device) -> int | None:
    """Bytes allocated at the peak of one call of ``fn``, above what was allocated before it
    (``None`` off CUDA, where ``fn`` still runs once)."""
    dev = torch.device(device)
    if dev.type != "cuda":
        fn()
        return None
    _sync(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    before = torch.cuda.memory_allocated(dev)
    fn()
    _sync(dev)
    return torch.cuda.max_memory_allocated(dev) - before


def _timed(fn: Callable[[], object], device: torch.device, **bench_options) -> float:
    return bench(fn, device="cuda" if device.type == "cuda" else "cpu", **bench_options)["ms"]


# ---------------------------------------------------------------------------- attention backend
# [attention-start]
def _attention_backends() -> dict[str, object]:
    from torch.nn.attention import SDPBackend

    return {"math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "flash": SDPBackend.FLASH_ATTENTION}


ATTENTION_BACKENDS = ("math", "efficient", "flash")


def attention_case(backend: str, batch: int, heads: int, seq: int, head_dim: int, *,
                   device: str = "cuda", dtype: torch.dtype = torch.bfloat16, time: bool = True) -> dict:
    """Causal SDPA forward and backward with one backend forced: saved bytes, peak, time."""
    from torch.nn.attention import sdpa_kernel

    if backend not in ATTENTION_BACKENDS:
        raise ValueError(f"backend must be one of {ATTENTION_BACKENDS}, got {backend!r}")
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(0)
    q, k, v = (torch.randn(batch, heads, seq, head_dim, device=dev, dtype=dtype, generator=gen,
                           requires_grad=True) for _ in range(3))
    grad_out = torch.randn(batch, heads, seq, head_dim, device=dev, dtype=dtype, generator=gen)

    def forward() -> torch.Tensor:
        with sdpa_kernel(_attention_backends()[backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def step() -> None:
        out = forward()
        with sdpa_kernel(_attention_backends()[backend]):
            out.backward(grad_out)
        q.grad = k.grad = v.grad = None

    step()  # first call: kernel selection, workspace
    return {"backend": backend, "batch": batch, "heads": heads, "seq": seq, "head_dim": head_dim,
            "dtype": str(dtype).removeprefix("torch."),
            "inputs": 3 * q.numel() * q.element_size(),  # q, k and v
            "saved": saved_bytes(forward),  # every distinct storage backward keeps, q, k, v included
            "peak": peak(step, dev), "ms": _timed(step, dev) if time else None}
# [attention-end]


# ---------------------------------------------------------------------------- recomputation
# [recompute-start]
_COMPUTE_OPS = {
    torch.ops.aten.mm.default, torch.ops.aten.addmm.default, torch.ops.aten.bmm.default,
    torch.ops.aten._scaled_dot_product_flash_attention.default,
    torch.ops.aten._scaled_dot_product_efficient_attention.default,
    torch.ops.aten._scaled_dot_product_cudnn_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
}


def _save_compute_outputs(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Selective recomputation's policy: keep what is expensive to redo, recompute the rest."""
    return CheckpointPolicy.MUST_SAVE if op in _COMPUTE_OPS else CheckpointPolicy.PREFER_RECOMPUTE


class Recomputed(nn.Module):
    """A block run under activation checkpointing: ``"full"`` or ``"selective"``."""

    def __init__(self, block: nn.Module, mode: str) -> None:
        super().__init__()
        if mode not in ("selective", "full"):
            raise ValueError(f"mode must be 'selective' or 'full', got {mode!r}")
        self.block, self.mode = block, mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == "full":  # keep x; rerun the whole block in backward
            return checkpoint(self.block, x, use_reentrant=False)
        context = functools.partial(create_selective_checkpoint_contexts, _save_compute_outputs)
        return checkpoint(self.block, x, use_reentrant=False, context_fn=context)


def with_recompute(model: GPT, mode: str) -> GPT:
    """Wrap each transformer block of ``model`` in :class:`Recomputed` (``"none"``: unchanged)."""
    if mode not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {RECOMPUTE}, got {mode!r}")
    if mode != "none":
        model.blocks = nn.ModuleList(Recomputed(b, mode) for b in model.blocks)
    return model
# [recompute-end]


# ---------------------------------------------------------------------------- offload
# [offload-start]
class HostAdamW:
    """AdamW whose moments and update live on the host (a subset of ZeRO-Offload).

    Each step copies the gradients to pinned host buffers, runs ``torch.optim.AdamW`` on host
    copies of the weights, and copies the updated weights back: the GPU keeps its float32
    weights and gradients and no moments. (ZeRO-Offload also moves the gradients and keeps only
    16-bit weights on the GPU.) The cost is two PCIe transfers and a CPU update per step.
    """

    def __init__(self, params: Iterable[nn.Parameter], **adamw) -> None:
        self.params = [p for p in params if p.requires_grad]
        pin = torch.cuda.is_available()
        self.host, self.grad_buffers = [], []
        for p in self.params:
            h = torch.empty(p.shape, dtype=torch.float32, pin_memory=pin)
            h.copy_(p.detach())
            self.host.append(h)
            self.grad_buffers.append(torch.empty_like(h, pin_memory=pin))
        self.opt = torch.optim.AdamW(self.host, **adamw)

    def step(self) -> None:
        for p, h, buf in zip(self.params, self.host, self.grad_buffers, strict=True):
            h.grad = None if p.grad is None else buf.copy_(p.grad, non_blocking=True)  # AdamW skips None
        if self.params and self.params[0].is_cuda:
            torch.cuda.synchronize(self.params[0].device)  # the gradients have landed
        self.opt.step()
        with torch.no_grad():
            for p, h in zip(self.params, self.host, strict=True):
                p.copy_(h, non_blocking=True)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None if set_to_none else (p.grad.zero_() if p.grad is not None else None)


def offload_blocks(model: GPT, device: str | torch.device) -> list:
    """Keep each block's weights in pinned host memory; bring them to ``device`` for its forward.

    A forward pre-hook copies the block's parameters to the GPU, a forward hook drops the GPU
    copies again, so one block's weights are resident at a time (the idea behind Accelerate's
    and diffusers' sequential CPU offload). For inference: backward would need them again.
    Returns the hook handles.
    """
    dev = torch.device(device)
    pin = dev.type == "cuda"
    handles = []
    for block in model.blocks:
        host = {n: p.detach().to("cpu").pin_memory() if pin else p.detach().to("cpu", copy=True)
                for n, p in block.named_parameters()}
        for n, p in block.named_parameters():
            p.data = host[n]

        def bring(mod, args, host=host):
            for n, p in mod.named_parameters():
                p.data = host[n].to(dev, non_blocking=True)

        def drop(mod, args, out, host=host):
            for n, p in mod.named_parameters():
                p.data = host[n]

        handles += [block.register_forward_pre_hook(bring), block.register_forward_hook(drop)]
    return handles
# [offload-end]


def _gpt(cfg: GPTConfig, device: torch.device, seed: int) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg).to(device)


def training_case(cfg: GPTConfig, batch: int, seq: int, *, recompute: str = "none",
                  offload: str = "none", device: str = "cuda", amp: bool = True, seed: int = 0,
                  time: bool = True) -> dict:
    """One AdamW training step of the book's GPT with one knob set: peak, time, loss."""
    if offload not in OFFLOADS:
        raise ValueError(f"offload must be one of {OFFLOADS}, got {offload!r}")
    dev = torch.device(device)
    model = with_recompute(_gpt(cfg, dev, seed), recompute)
    opt = HostAdamW(model.parameters()) if offload == "optimizer" else torch.optim.AdamW(model.parameters())
    gen = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen).to(dev)
    y = torch.randint(0, cfg.vocab_size, (batch, seq), generator=gen).to(dev)
    losses: list[float] = []
    after_forward: list[int] = []  # allocated bytes between forward and backward, per step

    def step(phases: dict | None = None) -> None:
        def mark(name: str) -> None:  # the peak of the phase that just ended, above resident
            if phases is not None:
                _sync(dev)
                phases[name] = torch.cuda.max_memory_allocated(dev) - resident
                torch.cuda.reset_peak_memory_stats(dev)

        saving = (torch.autograd.graph.save_on_cpu(pin_memory=dev.type == "cuda")
                  if offload == "activations" else contextlib.nullcontext())
        with saving, torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = model(x, y)[1]  # the logits are not kept: only what autograd saved stays
        if dev.type == "cuda":
            after_forward.append(torch.cuda.memory_allocated(dev))
        mark("forward")
        loss.backward()
        mark("backward")
        opt.step()
        opt.zero_grad(set_to_none=True)
        mark("optimizer step")
        losses.append(loss.detach())

    step()  # optimizer state exists from here on
    cuda = dev.type == "cuda"
    resident = torch.cuda.memory_allocated(dev) if cuda else None
    phases: dict[str, int] = {}
    if cuda:
        _sync(dev)
        torch.cuda.reset_peak_memory_stats(dev)
        step(phases)
    else:
        step()
    out = {"recompute": recompute, "offload": offload, "batch": batch, "seq": seq,
           "params": sum(p.numel() for p in model.parameters()),
           "resident": resident,  # between steps: weights, optimizer state, cuBLAS's workspace
           "phase_peaks": phases or None,  # per phase, above resident
           "peak": max(phases.values()) if phases else None,  # the step's peak above resident
           "ms": _timed(step, dev, min_reps=5) if time else None}
    # what the forward left for backward (the tensors autograd saved), above resident
    out["saved"] = after_forward[1] - resident if after_forward else None
    out["losses"] = [float(v) for v in losses[:2]]  # before and after the first update
    return out


def inference_case(cfg: GPTConfig, batch: int, seq: int, *, offload: bool = False,
                   device: str = "cuda", seed: int = 0, time: bool = True) -> dict:
    """A bf16 forward pass of the book's GPT, weights resident or streamed block by block."""
    dev = torch.device(device)
    model = _gpt(cfg, dev, seed).to(torch.bfloat16).eval()
    handles = offload_blocks(model, dev) if offload else []
    x = torch.randint(0, cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(seed)).to(dev)
    logits: list[torch.Tensor] = []

    @torch.inference_mode()
    def forward() -> None:
        logits[:] = [model(x)[0]]

    forward()
    resident = torch.cuda.memory_allocated(dev) if dev.type == "cuda" else None
    out = {"offload": offload, "batch": batch, "seq": seq, "resident": resident,
           "peak": peak(forward, dev), "ms": _timed(forward, dev, min_reps=5) if time else None,
           "logits_sum": float(logits[0].float().sum())}
    for h in handles:
        h.remove()
    return out


def variable_length_case(cfg: GPTConfig, batch: int, seqs: Sequence[int], *, expandable: bool,
                         device: str = "cuda", seed: int = 0) -> dict:
    """Training steps at changing sequence lengths; the allocator's reserved and allocated peaks.

    Needs CUDA. The allocator setting is switched for the run and set back to the default
    (``expandable_segments:False``) after it; the cache is emptied before, so the run starts from
    nothing reserved.
    """
    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError("variable_length_case needs a CUDA device")
    setting = (getattr(torch._C, "_accelerator_setAllocatorSettings", None)
               or torch.cuda.memory._set_allocator_settings)
    setting(f"expandable_segments:{expandable}")
    try:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        torch.cuda.reset_accumulated_memory_stats(dev)  # so the retry count is this run's
        model = _gpt(cfg, dev, seed)
        opt = torch.optim.AdamW(model.parameters())
        gen = torch.Generator().manual_seed(seed)
        for s in seqs:
            x = torch.randint(0, cfg.vocab_size, (batch, s), generator=gen).to(dev)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                _, loss = model(x, x)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        _sync(dev)
        stats = torch.cuda.memory_stats(dev)
        out = {"expandable": expandable, "seqs": list(seqs),
               "peak_allocated": stats["allocated_bytes.all.peak"],
               "peak_reserved": stats["reserved_bytes.all.peak"],
               "segments": stats["segment.all.current"], "cudaMalloc_retries": stats["num_alloc_retries"]}
        del model, opt
        return out
    finally:
        setting("expandable_segments:False")
        torch.cuda.empty_cache()


# ---------------------------------------------------------------------------- VAE decode
# [vae-start]
SD_VAE = {  # Stable Diffusion's VAE shape (random weights): 8x upsampling, 4 latent channels
    "block_out_channels": (128, 256, 512, 512), "layers_per_block": 2, "latent_channels": 4,
    "down_block_types": ("DownEncoderBlock2D",) * 4, "up_block_types": ("UpDecoderBlock2D",) * 4,
    "sample_size": 512,
}


def autoencoder(config: dict | None = None, device: str | torch.device = "cpu",
                dtype: torch.dtype = torch.float32, seed: int = 0):
    """diffusers' ``AutoencoderKL`` with random weights (Stable Diffusion's shape by default)."""
    import warnings

    with warnings.catch_warnings():  # tqdm, imported by diffusers, warns in a notebook without widgets
        warnings.simplefilter("ignore")
        from diffusers import AutoencoderKL
        from diffusers.utils import logging as diffusers_logging

    diffusers_logging.set_verbosity_error()  # its note on casting with .to() concerns loaded weights
    torch.manual_seed(seed)
    return AutoencoderKL(**(config or SD_VAE)).to(device, dtype).eval()


def vae_decode_case(mode: str, batch: int, latent: int, *, device: str = "cuda",
                    dtype: torch.dtype = torch.bfloat16, config: dict | None = None,
                    time: bool = True) -> dict:
    """Decode ``batch`` latents of ``latent x latent`` with diffusers' ``AutoencoderKL``.

    ``mode``: ``"none"``, ``"tiling"`` (``enable_tiling``: overlapping latent tiles decoded one by
    one and blended) or ``"slicing"`` (``enable_slicing``: the batch decoded one image at a time).
    """
    if mode not in ("none", "tiling", "slicing"):
        raise ValueError(f"mode must be 'none', 'tiling' or 'slicing', got {mode!r}")
    dev = torch.device(device)
    vae = autoencoder(config, dev, dtype)
    if mode == "tiling":
        vae.enable_tiling()
    elif mode == "slicing":
        vae.enable_slicing()
    z = torch.randn(batch, vae.config.latent_channels, latent, latent, device=dev, dtype=dtype,
                    generator=torch.Generator(device=dev).manual_seed(0))
    images: list[torch.Tensor] = []

    @torch.inference_mode()
    def decode() -> None:
        images[:] = [vae.decode(z).sample]

    decode()
    decoder = [*vae.decoder.parameters(), *vae.post_quant_conv.parameters()]  # what decode() uses
    out = {"mode": mode, "batch": batch, "latent": latent, "image": list(images[0].shape[-2:]),
           "weights": sum(p.numel() * p.element_size() for p in vae.parameters()),
           "decoder_weights": sum(p.numel() * p.element_size() for p in decoder),
           "peak": peak(decode, dev), "ms": _timed(decode, dev, min_reps=3) if time else None}
    return out
# [vae-end]
