"""A constructed linear layer whose inputs have a few outlier channels and correlated features,
the two properties of transformer activations that quantization methods are built around
(LLM.int8()'s outlier features, Dettmers et al., 2022). It stands in for calibration data until
the book's trained models provide real activations; every page that uses it says so.
"""

from __future__ import annotations

import torch

__all__ = ["outlier_layer"]


# [quant:outlier-layer]
def outlier_layer(n: int = 256, k: int = 512, samples: int = 4096, outliers: int = 4,
                  outlier_scale: float = 30.0, mixing: float = 0.5, seed: int = 0,
                  held_out: int = 4096):
    """``(w, x, x_held_out)``: weights (n, k) with rows of different magnitudes, calibration
    inputs (samples, k) and held-out inputs (held_out, k) from the same distribution: Gaussian
    features mixed by one random matrix (correlation), then the same ``outliers`` channels
    multiplied by ``outlier_scale``. float64."""
    gen = torch.Generator().manual_seed(seed)
    row_scale = torch.exp(0.5 * torch.randn(n, 1, generator=gen, dtype=torch.float64))
    w = torch.randn(n, k, generator=gen, dtype=torch.float64) * row_scale / k**0.5
    mix = torch.eye(k, dtype=torch.float64) + mixing * torch.randn(
        k, k, generator=gen, dtype=torch.float64) / k**0.5
    channels = torch.randperm(k, generator=gen)[:outliers]
    x = torch.randn(samples + held_out, k, generator=gen, dtype=torch.float64) @ mix
    x[:, channels] *= outlier_scale
    return w, x[:samples], x[samples:]
# [/quant:outlier-layer]
