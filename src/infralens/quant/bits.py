"""Bits per stored weight once a group's shared metadata (its scale and zero point) is counted."""

from __future__ import annotations

__all__ = ["effective_bits"]


# [quant:effective-bits]
def effective_bits(bits: float, group_size: int, scale_bits: float = 16, zero_bits: float = 0
                   ) -> float:
    """Bits per weight: the element's ``bits`` plus its share of the group's metadata, one
    ``scale_bits`` scale and one ``zero_bits`` zero point per ``group_size`` weights."""
    if bits <= 0 or group_size < 1 or scale_bits < 0 or zero_bits < 0:
        raise ValueError(f"effective_bits needs bits > 0, group_size >= 1 and non-negative "
                         f"metadata bits; got bits={bits}, group_size={group_size}, "
                         f"scale_bits={scale_bits}, zero_bits={zero_bits}")
    return bits + (scale_bits + zero_bits) / group_size
# [/quant:effective-bits]
