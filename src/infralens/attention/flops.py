"""The FLOPs of attention: the one count every page and benchmark of the book uses."""

from __future__ import annotations

__all__ = ["attention_flops"]


def attention_flops(batch: int, n_heads: int, seq_q: int, seq_k: int, head_dim: int,
                    causal: bool = False) -> int:
    """Forward FLOPs of one attention call, q k^T and p v, at 2 FLOP per multiply-add.

    Non-causal: 4 * B * a * S_q * S_k * d. Causal (S_q == S_k): half of that, the convention of
    the FlashAttention benchmarks (the masked half is skipped). The exact count of visible pairs
    is S(S+1)/2, not S^2/2: the two differ by a factor 1 + 1/S, and a tiled kernel that computes
    whole diagonal blocks does a little more.
    """
    full = 4 * batch * n_heads * seq_q * seq_k * head_dim
    if not causal:
        return full
    if seq_q != seq_k:
        raise ValueError("the half-of-full convention is for square causal attention (S_q == S_k)")
    return full // 2
