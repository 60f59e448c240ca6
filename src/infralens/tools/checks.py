"""Argument checks shared by the calculators, each failing with one readable line."""

from __future__ import annotations


def require_positive(**sizes: object) -> None:
    """Raise ``ValueError`` naming the first argument that is not a positive integer.

    ``require_positive(batch=0)`` fails with ``batch must be a positive integer, got 0``.
    ``bool`` is refused although Python counts it as an ``int``: ``True`` is not a size.
    """
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
