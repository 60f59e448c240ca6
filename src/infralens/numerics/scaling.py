"""Keeping values inside a short format's range: loss scaling for FP16, per-tensor scales for FP8,
and stochastic rounding for updates smaller than a weight's spacing.

* :class:`DynamicLossScaler`: multiply the loss by ``S`` so that small gradients survive FP16;
  halve ``S`` on any overflow (and skip that step), double it after ``growth_interval`` clean
  steps. The rule and its defaults are those of ``torch.amp.GradScaler`` {cite}`pytorch2025amp`,
  after {cite}`micikevicius2018mixed`.
* :class:`DelayedScaling`: an FP8 scale per tensor computed from the largest magnitudes (amax)
  seen over the last steps, not the current one, so that the scale is known before the tensor is
  produced, as Transformer Engine's default recipe does {cite}`nvidia2025transformerengine`.
* :func:`quantize_fp8`: scale, saturate and cast to an FP8 dtype; :func:`stochastic_round_bf16`:
  FP32 to BF16 rounding up or down with probabilities that make it unbiased {cite}`gupta2015deep`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from infralens.numerics.formats import FORMATS

__all__ = ["DynamicLossScaler", "DelayedScaling", "quantize_fp8", "stochastic_round_bf16",
           "scaled_training_steps",
           "grads_out_of_range"]


# [numerics:loss-scaler]
@dataclass
class DynamicLossScaler:
    """The dynamic loss-scaling rule, one ``update`` per optimizer step."""

    scale: float = 2.0**16
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    clean_steps: int = 0          # finite steps since the last change

    def update(self, found_inf: bool) -> bool:
        """Adjust the scale after a step's gradients were checked; returns whether the
        optimizer step should be taken (False: the step is skipped)."""
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            return False
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0
        return True
# [/numerics:loss-scaler]


def grads_out_of_range(grads: torch.Tensor, scale: float, fmt: str = "fp16") -> dict[str, float]:
    """What fraction of the (float32) gradient values ``grads * scale`` would lose in ``fmt``:
    ``zero`` (below half the smallest subnormal: rounds to 0), ``subnormal`` (nonzero but below
    the smallest normal: fewer significant bits), ``overflow`` (above the largest finite value)."""
    f = FORMATS[fmt]
    a = grads.detach().abs().double().flatten() * scale
    a = a[a > 0]
    n = a.numel()
    return {"zero": (a < f.min_subnormal / 2).sum().item() / n,
            "subnormal": ((a >= f.min_subnormal / 2) & (a < f.min_normal)).sum().item() / n,
            "overflow": (a > f.max_normal).sum().item() / n}


# [numerics:fp8-quantize]
def quantize_fp8(x: torch.Tensor, scale: float, dtype: torch.dtype = torch.float8_e4m3fn
                 ) -> torch.Tensor:
    """x * scale, clamped to the format's largest value (saturation, not NaN) and cast."""
    fmax = torch.finfo(dtype).max
    return (x.float() * scale).clamp(-fmax, fmax).to(dtype)
# [/numerics:fp8-quantize]


# [numerics:delayed-scaling]
@dataclass
class DelayedScaling:
    """A per-tensor FP8 scale from an amax history: ``scale = fp8_max / max(history) / 2^margin``.

    ``step(x)`` quantizes ``x`` with the scale computed *before* seeing it, then records x's
    amax and recomputes the scale for the next step. A zero or non-finite amax keeps the old
    scale."""

    fmt: str = "e4m3fn"
    history_len: int = 1024
    margin: int = 0
    scale: float = 1.0
    history: list[float] = field(default_factory=list)

    def step(self, x: torch.Tensor) -> torch.Tensor:
        dtype = getattr(torch, FORMATS[self.fmt].torch_dtype)
        q = quantize_fp8(x, self.scale, dtype)
        self.history = ([x.detach().abs().max().item()] + self.history)[: self.history_len]
        amax = max(self.history)
        if amax > 0 and math.isfinite(amax):
            self.scale = FORMATS[self.fmt].max_normal / amax / 2.0**self.margin
        return q
# [/numerics:delayed-scaling]


# [numerics:stochastic-rounding]
def stochastic_round_bf16(x: torch.Tensor, generator: torch.Generator | None = None
                          ) -> torch.Tensor:
    """FP32 -> BF16, rounding up (away from zero) with probability equal to the fraction of the
    gap the dropped 16 bits represent: add a uniform 16-bit integer to the low half of the FP32
    pattern, then truncate. E[result] = x for every finite x whose neighbours are finite."""
    bits = x.float().contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, x.shape, dtype=torch.int32, generator=generator)
    rounded = ((bits + noise) & ~0xFFFF).view(torch.float32)
    rounded = torch.where(torch.isfinite(x), rounded, x.float())
    return rounded.to(torch.bfloat16)        # exact: the low 16 bits are already zero
# [/numerics:stochastic-rounding]


# [numerics:scaled-steps]
def scaled_training_steps(model: torch.nn.Module, batches, steps: int, lr: float = 1e-3,
                          init_scale: float = 2.0**24, growth_interval: int = 4,
                          device_type: str = "cpu", dtype: torch.dtype = torch.float16
                          ) -> list[dict]:
    """Train ``model`` (which returns ``(logits, loss)``) under ``torch.autocast(dtype)`` with
    ``torch.amp.GradScaler``, and feed the same overflow findings to :class:`DynamicLossScaler`.

    ``batches`` yields ``(inputs, targets)``. Each row: the scale the step used, whether its
    gradients held an inf or NaN, and the next scale from torch and from the rule above."""
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    theirs = torch.amp.GradScaler(device_type, init_scale=init_scale,
                                  growth_interval=growth_interval)
    ours = DynamicLossScaler(scale=init_scale, growth_interval=growth_interval)
    rows = []
    for step in range(steps):
        x, y = next(batches)
        with torch.autocast(device_type, dtype=dtype):
            _, loss = model(x, y)
        used = theirs.get_scale()
        theirs.scale(loss).backward()
        found_inf = not all(torch.isfinite(p.grad).all().item()
                            for p in model.parameters() if p.grad is not None)
        theirs.step(opt)                     # skipped inside GradScaler when it finds an inf
        theirs.update()
        ours.update(found_inf)
        rows.append({"step": step, "scale": used, "found_inf": found_inf, "loss": loss.item(),
                     "next_torch": theirs.get_scale(), "next_ours": ours.scale})
        opt.zero_grad(set_to_none=True)
    return rows
# [/numerics:scaled-steps]
