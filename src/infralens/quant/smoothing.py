"""Per-input-channel rescaling that moves quantization difficulty between activations and weights.

For a linear layer ``y = x W^T`` and any positive vector ``s`` over the K inputs,
``y = (x / s) (W * s)^T`` exactly: divide each input channel by ``s_j`` (folded into the op
that produces ``x``, such as a norm's gain) and multiply the matching weight column by it.
Two methods choose ``s``:

* AWQ (Lin et al., 2024) protects the weights that meet large activations: ``s = s_x^alpha``
  from the mean magnitude of each input channel, ``alpha`` searched on a grid to minimize the
  layer's output error after the *weights* are quantized (activations stay in 16 bits).
* SmoothQuant (Xiao et al., 2023) flattens activation outliers so that *both* can be INT8:
  ``s_j = max|x_j|^alpha / max|W_j|^(1 - alpha)``, with ``alpha`` usually 0.5.
"""

from __future__ import annotations

import torch

from infralens.quant.affine import fake_quantize

__all__ = ["apply_scales", "awq_search", "smoothquant_scales", "quantize_activations",
           "w8a8_output", "int8_decomposed_output", "AWQ_GRID", "SMOOTHQUANT_ALPHA",
           "LLM_INT8_THRESHOLD"]

#: AWQ's grid: alpha in {0, 1/20, ..., 19/20} (Lin et al., 2024, section 3.3 and their code).
AWQ_GRID = 20
#: SmoothQuant's default migration strength (Xiao et al., 2023, section 4).
SMOOTHQUANT_ALPHA = 0.5
#: LLM.int8()'s outlier threshold on activation magnitude (Dettmers et al., 2022, section 3.2).
LLM_INT8_THRESHOLD = 6.0


def apply_scales(w: torch.Tensor, x: torch.Tensor, s: torch.Tensor):
    """(W * s, x / s): the scaled weight (N, K) and inputs (..., K); their product is unchanged."""
    return w * s[None, :], x / s


# [quant:awq]
def awq_search(w: torch.Tensor, x: torch.Tensor, bits: int = 4, group_size: int = 128,
               grid: int = AWQ_GRID) -> dict:
    """Search AWQ's per-input-channel scale for ``w`` (N, K) on calibration inputs ``x`` (n, K).

    Returns the best ``alpha``, the scales ``s``, the effective weight (quantized ``W * s``,
    divided back by ``s``, float64) and the output error for every alpha on the grid."""
    w, x = w.double(), x.reshape(-1, x.shape[-1]).double()
    ref = x @ w.T
    s_x = x.abs().mean(dim=0)
    errors, best = {}, None
    for i in range(grid):
        alpha = i / grid
        s = s_x.pow(alpha).clamp(min=1e-4)
        s = s / (s.max() * s.min()).sqrt()                 # centre the scales around 1
        w_eff = fake_quantize(w * s[None, :], bits, "group", group_size) / s[None, :]
        err = float((x @ w_eff.T - ref).pow(2).mean())
        errors[alpha] = err
        if best is None or err < best[0]:
            best = (err, alpha, s, w_eff)
    return {"alpha": best[1], "scales": best[2], "weight": best[3], "errors": errors}
# [/quant:awq]


# [quant:smoothquant]
def smoothquant_scales(x_absmax: torch.Tensor, w: torch.Tensor, alpha: float = SMOOTHQUANT_ALPHA
                       ) -> torch.Tensor:
    """s_j = max|x_j|^alpha / max_i |W_ij|^(1 - alpha), per input channel j."""
    w_absmax = w.abs().amax(dim=0).clamp(min=1e-5)
    return (x_absmax.clamp(min=1e-5).pow(alpha) / w_absmax.pow(1 - alpha)).clamp(min=1e-5)
# [/quant:smoothquant]


def quantize_activations(x: torch.Tensor, bits: int = 8, per: str = "tensor") -> torch.Tensor:
    """Dynamic symmetric fake quantization of activations (n, K) from their current values: one
    scale per tensor or per token (a row, which is the affine quantizer's "channel")."""
    if per not in ("tensor", "token"):
        raise ValueError(f"per must be 'tensor' or 'token', got {per!r}")
    return fake_quantize(x, bits, "channel" if per == "token" else "tensor")


def w8a8_output(w: torch.Tensor, x: torch.Tensor, act: str = "tensor",
                alpha: float | None = None, x_calib: torch.Tensor | None = None) -> torch.Tensor:
    """y = Q(x) Q(W)^T with INT8 weights per output channel and INT8 activations per tensor or
    per token; with ``alpha`` the pair is smoothed first (SmoothQuant), with scales from the
    per-channel maxima of ``x_calib`` (calibration data; ``x`` itself when not given). float64."""
    w, x = w.double(), x.reshape(-1, x.shape[-1]).double()
    if alpha is not None:
        calib = x if x_calib is None else x_calib.reshape(-1, x_calib.shape[-1]).double()
        w, x = apply_scales(w, x, smoothquant_scales(calib.abs().amax(dim=0), w, alpha))
    return quantize_activations(x, 8, act) @ fake_quantize(w, 8, "channel").T


# [quant:llm-int8]
def int8_decomposed_output(w: torch.Tensor, x: torch.Tensor,
                           threshold: float = LLM_INT8_THRESHOLD) -> torch.Tensor:
    """LLM.int8(): input channels where any activation exceeds ``threshold`` in magnitude are
    multiplied in 16-bit (here float64); the rest in INT8, per token and per output channel."""
    w, x = w.double(), x.reshape(-1, x.shape[-1]).double()
    outlier = (x.abs() > threshold).any(dim=0)
    regular = ~outlier
    y = x[:, outlier] @ w[:, outlier].T
    if regular.any():
        y = y + quantize_activations(x[:, regular], 8, "token") @ fake_quantize(
            w[:, regular], 8, "channel").T
    return y
# [/quant:llm-int8]
