"""Quantize a whole model: every linear layer of its transformer blocks, by one method, in one
format and granularity (a :class:`~infralens.quant.plan.Cell`), and measure what it costs.

The model computes with the weights the codes stand for (fake quantization: dequantized values in
the model's dtype), and for the W8A8 methods with its linear layers' inputs rounded the same way,
so any method runs on any device and the loss it adds can be read directly. The embedding, the
norms, the biases and the (tied) output layer stay in 16 bits, as weight-only schemes usually
leave them.

Calibrated methods read each layer's inputs on a calibration batch. GPTQ reads them *as the model
quantized so far produces them*: the layers are quantized in the order the forward pass meets
them, and before each one the batch runs through the model with the earlier layers already
replaced, so later layers absorb earlier errors (its sequential calibration). AWQ and SmoothQuant
read every layer's inputs from one pass of the unquantized model, as the authors' code does.
SmoothQuant rescales only the layers that follow a LayerNorm (:data:`SMOOTHED`), whose divisor
folds into the norm's weights; the attention and MLP output projections stay plain W8A8. AWQ here
is its scale search alone, with symmetric INT4 and no search over clipping ranges.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from infralens.numerics.scaling import quantize_fp8
from infralens.quant.affine import fake_quantize
from infralens.quant.bits import effective_bits
from infralens.quant.gptq import gptq_quantize
from infralens.quant.plan import CALIBRATED, QUANTIZES_ACTIVATIONS, SEQUENTIAL, Cell
from infralens.quant.smoothing import awq_search, quantize_activations, smoothquant_scales

__all__ = ["QuantLinear", "block_linears", "layer_inputs", "quantize_model", "fp8_fake_quantize",
           "weight_bytes", "perplexity", "window_losses", "paired_change", "channel_absmax",
           "SMOOTHED"]

#: The layers SmoothQuant rescales: those whose input comes from a LayerNorm, into which the
#: divisor folds (as the authors' ``smooth_lm`` does); the others stay plain W8A8.
SMOOTHED = ("attn.qkv", "mlp.fc")

E4M3 = torch.float8_e4m3fn


def fp8_fake_quantize(x: torch.Tensor, per: str = "tensor") -> torch.Tensor:
    """``x`` rounded to E4M3 with a scale that maps its largest magnitude (per tensor, or per row
    for ``"channel"``) to the format's largest value, and scaled back, in ``x``'s dtype."""
    if per not in ("tensor", "channel"):
        raise ValueError(f"per must be 'tensor' or 'channel', got {per!r}")
    amax = x.abs().amax() if per == "tensor" else x.abs().amax(dim=-1, keepdim=True)
    scale = torch.finfo(E4M3).max / amax.float().clamp(min=torch.finfo(torch.float32).tiny)
    return (quantize_fp8(x, scale).float() / scale).to(x.dtype)


# [quant:quant-linear]
class QuantLinear(nn.Module):
    """A linear layer that computes with quantized weights and, optionally, rounds its input first:
    ``y = Q_a(x / s) W_q^T + b``. ``s`` is SmoothQuant's per-input-channel divisor (in a deployed
    model it is folded into the norm before the layer), ``Q_a`` a per-tensor INT8 or E4M3 rounding
    of the activations from their current values."""

    def __init__(self, linear: nn.Linear, weight: torch.Tensor, act: str | None = None,
                 smooth: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight = nn.Parameter(weight.to(linear.weight), requires_grad=False)
        self.bias = linear.bias
        self.act = act
        self.register_buffer("smooth", None if smooth is None else smooth.to(linear.weight))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.smooth is not None:
            x = x / self.smooth
        if self.act == "int8":
            x = quantize_activations(x.reshape(-1, x.shape[-1]), 8, "tensor").reshape(x.shape)
        elif self.act == "e4m3":
            x = fp8_fake_quantize(x, "tensor")
        return F.linear(x, self.weight, self.bias)
# [/quant:quant-linear]


def block_linears(model: nn.Module) -> Iterator[tuple[str, nn.Linear]]:
    """The linear layers of the transformer blocks, in the order the forward pass meets them
    (``named_modules`` follows registration order, which is the forward order in this GPT)."""
    for name, mod in model.named_modules():
        if name.startswith("blocks.") and isinstance(mod, nn.Linear | QuantLinear):
            yield name, mod


@torch.no_grad()
def layer_inputs(model: nn.Module, names: list[str], tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inputs (n_tokens, in_features) that the layers ``names`` receive when ``model`` runs on
    ``tokens`` (B, T)."""
    seen: dict[str, torch.Tensor] = {}
    mods = dict(model.named_modules())
    hooks = [mods[name].register_forward_pre_hook(
        lambda mod, args, name=name: seen.__setitem__(name, args[0].reshape(-1, args[0].shape[-1])))
        for name in names]
    try:
        model(tokens)
    finally:
        for h in hooks:
            h.remove()
    return seen


def _weight(cell: Cell, w: torch.Tensor, x: torch.Tensor | None, group_size: int, alpha: float,
            smooth_this: bool = True):
    """The quantized weight (N, K) for one layer, and SmoothQuant's divisor (or None)."""
    k = w.shape[1]
    group = group_size if cell.granularity == "group" else None
    if cell.format == "e4m3":
        return fp8_fake_quantize(w.double(), cell.granularity), None
    if cell.method == "gptq":
        return gptq_quantize(w, x, cell.bits, group_size=group), None
    if cell.method == "awq":
        return awq_search(w, x, cell.bits, group_size=group or k)["weight"], None
    smooth = None
    if cell.method == "smoothquant" and smooth_this:
        smooth = smoothquant_scales(x.double().abs().amax(dim=0), w.double(), alpha)
        w = w.double() * smooth[None, :]
    return fake_quantize(w.double(), cell.bits, cell.granularity, group), smooth


# [quant:quantize-model]
@torch.no_grad()
def quantize_model(model: nn.Module, cell: Cell, group_size: int,
                   calibration: torch.Tensor | None = None, alpha: float = 0.5) -> nn.Module:
    """A copy of ``model`` with every block linear replaced by a :class:`QuantLinear` for
    ``cell``; calibrated methods (GPTQ, AWQ, SmoothQuant) read ``calibration`` tokens (B, T)."""
    model = copy.deepcopy(model).eval()
    if cell.method in CALIBRATED and calibration is None:
        raise ValueError(f"{cell.method} needs calibration tokens")
    mods = dict(model.named_modules())
    layers = list(block_linears(model))
    inputs = {}
    if cell.method in CALIBRATED and cell.method not in SEQUENTIAL:   # one unquantized pass
        inputs = layer_inputs(model, [name for name, _ in layers], calibration)
    for name, linear in layers:
        x = inputs.get(name)
        if cell.method in SEQUENTIAL:                           # inputs from the model so far
            x = layer_inputs(model, [name], calibration)[name]
        weight, smooth = _weight(cell, linear.weight, x, group_size, alpha, name.endswith(SMOOTHED))
        parent, attr = name.rsplit(".", 1)
        setattr(mods[parent], attr, QuantLinear(linear, weight, QUANTIZES_ACTIVATIONS.get(
            cell.method), smooth))
    return model
# [/quant:quantize-model]


def weight_bytes(model: nn.Module, cell: Cell | None, group_size: int, other_bits: int = 16
                 ) -> float:
    """Bytes of the model's weights: the block linears at the cell's effective bits (codes plus
    16-bit scales, :func:`~infralens.quant.effective_bits`; FP8 scales are FP32), every other
    parameter (embeddings, norms, biases) at ``other_bits``. ``cell=None``: all at ``other_bits``."""
    linears = [m for _, m in block_linears(model)] if cell is not None else []
    quantized = {id(m.weight) for m in linears}
    total = sum(p.numel() * other_bits / 8 for p in model.parameters() if id(p) not in quantized)
    for m in linears:
        n, k = m.weight.shape
        per_scale = {"tensor": n * k, "channel": k, "group": group_size}[cell.granularity]
        scale_bits = 32 if cell.format == "e4m3" else 16
        total += n * k * effective_bits(cell.bits, per_scale, scale_bits) / 8
    return total


@torch.no_grad()
def window_losses(model: nn.Module, tokens: torch.Tensor, seq_len: int, batch: int = 64
                  ) -> torch.Tensor:
    """The mean next-token cross-entropy (nats) of each non-overlapping window of ``tokens`` (1-D),
    as a float64 tensor (windows,)."""
    n = (len(tokens) - 1) // seq_len
    if n < 1:
        raise ValueError(f"{len(tokens)} tokens hold no window of {seq_len} + 1")
    device = next(model.parameters()).device
    out = []
    for i in range(0, n, batch):
        rows = range(i, min(i + batch, n))
        x = torch.stack([tokens[r * seq_len: (r + 1) * seq_len] for r in rows]).to(device)
        y = torch.stack([tokens[r * seq_len + 1: (r + 1) * seq_len + 1] for r in rows]).to(device)
        logits = model(x)[0].float()
        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
        out.append(ce.reshape(len(rows), seq_len).double().mean(dim=1).cpu())
    return torch.cat(out)


def perplexity(model: nn.Module, tokens: torch.Tensor, seq_len: int, batch: int = 64) -> float:
    """exp(mean next-token cross-entropy) over the non-overlapping windows of ``tokens`` (1-D)."""
    return math.exp(float(window_losses(model, tokens, seq_len, batch).mean()))


# [quant:paired]
def paired_change(losses: torch.Tensor, reference: torch.Tensor, blocks: int | None = None
                  ) -> tuple[float, float]:
    """Perplexity change of a model against a reference on the same windows, in percent, and its
    standard error from the spread of the differences d = losses - reference: ``100 (exp(mean d)
    - 1)`` and ``100 exp(mean d) s / sqrt(n)``. Neighbouring windows come from the same file and
    are correlated, so with ``blocks`` the error is taken over that many blocks of consecutive
    windows (their mean differences), not over single windows. It measures the held-out text's
    sampling noise only, not the calibration sample's or the training seed's."""
    d = torch.as_tensor(losses, dtype=torch.float64) - torch.as_tensor(reference, dtype=torch.float64)
    ratio = math.exp(float(d.mean()))
    if blocks:
        size = max(1, len(d) // blocks)
        d = d[: size * (len(d) // size)].reshape(-1, size).mean(dim=1)
    return 100 * (ratio - 1), 100 * ratio * float(d.std()) / math.sqrt(len(d))
# [/quant:paired]


def channel_absmax(model: nn.Module, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """Per input channel, the largest magnitude each block linear's input reaches on ``tokens``."""
    names = [name for name, _ in block_linears(model)]
    return {name: x.abs().amax(dim=0).float().cpu()
            for name, x in layer_inputs(model, names, tokens).items()}
