"""Quantization: storing weights and activations in fewer bits, with per-group scales.

* :mod:`~infralens.quant.bits`: :func:`effective_bits`, the bits each weight costs once its group's
  scale (and zero point) are counted, the number that sets a quantized model's size and its decode
  bandwidth.
"""

from __future__ import annotations

from infralens.quant.bits import effective_bits

__all__ = ["effective_bits"]
