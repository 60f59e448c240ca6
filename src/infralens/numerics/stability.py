"""Guards against the values that grow without bound in training, and a tool for finding where a
non-finite value first appears.

* :func:`logsumexp_stable`: ``log sum exp(z)`` with the maximum subtracted first, so no term
  overflows; the naive form overflows once one logit passes ``log(max_normal)``.
* :func:`z_loss`: PaLM's auxiliary loss ``coeff * log(Z)^2`` that pulls the softmax normalizer
  ``Z`` towards 1 {cite}`chowdhery2022palm`, with the coefficient the paper used.
* :func:`soft_cap`: ``cap * tanh(x / cap)``, which bounds logits smoothly, with the caps Gemma 2
  used for attention and final logits {cite}`gemmateam2024gemma2`.
* :func:`first_nonfinite`: run a model with forward hooks and name the first module whose
  output holds an infinity or a NaN.
"""

from __future__ import annotations

import torch

__all__ = ["PALM_Z_LOSS_COEFF", "GEMMA2_ATTN_SOFTCAP", "GEMMA2_FINAL_SOFTCAP",
           "logsumexp_stable", "z_loss", "soft_cap", "first_nonfinite"]

#: PaLM's z-loss coefficient (Chowdhery et al., 2022, section 5).
PALM_Z_LOSS_COEFF = 1e-4
#: Gemma 2's soft caps: attention logits and final logits (Gemma Team, 2024, section 2).
GEMMA2_ATTN_SOFTCAP = 50.0
GEMMA2_FINAL_SOFTCAP = 30.0


# [numerics:logsumexp]
def logsumexp_stable(z: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """log(sum(exp(z))) as m + log(sum(exp(z - m))), m = max(z): every exponent is <= 0."""
    m = z.amax(dim=dim, keepdim=True)
    return (m + (z - m).exp().sum(dim=dim, keepdim=True).log()).squeeze(dim)
# [/numerics:logsumexp]


# [numerics:z-loss]
def z_loss(logits: torch.Tensor, coeff: float = PALM_Z_LOSS_COEFF) -> torch.Tensor:
    """coeff * mean over positions of log(Z)^2, Z = sum(exp(logits)) over the vocabulary.
    Its gradient with respect to the logits is 2 coeff log(Z) softmax(logits) per position."""
    wide = logits.to(torch.promote_types(logits.dtype, torch.float32))   # at least FP32
    return coeff * logsumexp_stable(wide).pow(2).mean()
# [/numerics:z-loss]


# [numerics:soft-cap]
def soft_cap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """cap * tanh(x / cap): close to x for |x| << cap, never beyond +-cap."""
    return cap * torch.tanh(x / cap)
# [/numerics:soft-cap]


# [numerics:first-nonfinite]
def first_nonfinite(model: torch.nn.Module, *inputs) -> str | None:
    """The qualified name of the first module (in execution order) whose output holds an inf or
    NaN during ``model(*inputs)``, or None when every output is finite."""
    found: list[str] = []
    names = {m: n for n, m in model.named_modules()}

    def hook(module, _args, output):
        outs = output if isinstance(output, tuple) else (output,)
        bad = any(isinstance(o, torch.Tensor) and o.is_floating_point()
                  and not torch.isfinite(o).all() for o in outs)
        if bad and not found:
            found.append(names[module] or type(module).__name__)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in handles:
            h.remove()
    return found[0] if found else None
# [/numerics:first-nonfinite]
