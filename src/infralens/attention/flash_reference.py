"""FlashAttention in plain PyTorch: the algorithm without the kernel.

:func:`flash_attention_forward` is the tiled forward pass (FlashAttention-2's loop order: one
query block at a time, a loop over key/value blocks, one normalization at the end);
:func:`flash_attention_forward_paper` is the same result in the first paper's loop order. Both
tally their HBM traffic in an optional :class:`~infralens.attention.io_model.IOCount`.
Shapes: ``q``, ``k``, ``v`` are ``(..., S, d)``; leading dimensions (batch, heads) are carried
along. Nothing here needs a GPU; in float64 both agree with
:func:`~infralens.attention.reference.naive_attention` to about 1e-15.

The backward pass is here too: :func:`attention_backward` writes its formulas on whole matrices,
from the saved output and log-sum-exp; :func:`flash_attention_backward` runs them in
FlashAttention-2's backward loop order (key/value blocks outside, dQ accumulated across them).
"""

from __future__ import annotations

import math

import torch

from infralens.attention.io_model import IOCount
from infralens.attention.masks import visible
from infralens.attention.reference import softmax_scale

__all__ = ["flash_attention_forward", "flash_attention_forward_paper", "attention_backward",
           "flash_attention_backward"]


# [attention:tiled]
def flash_attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                            causal: bool = False, scale: float | None = None, block_m: int = 64,
                            block_n: int = 64, io: IOCount | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """Tiled attention forward (FlashAttention-2's loop order). Returns (O, logsumexp).

    Each query block is what one program of the Triton kernel owns: its running max, sum and
    output accumulator stay on chip while it loops over the key/value blocks.
    """
    io = IOCount() if io is None else io
    scale = softmax_scale(q, scale)
    S = q.shape[-2]
    out = torch.empty_like(q)  # (..., S, d)
    lse = q.new_empty(q.shape[:-1])  # (..., S) log of the normalizer, what a backward needs
    for i0 in range(0, S, block_m):
        q_i = q[..., i0:i0 + block_m, :]  # (..., bm, d) read once
        rows = torch.arange(i0, i0 + q_i.shape[-2], device=q.device)
        m_i = q.new_full(q_i.shape[:-1], -math.inf)  # (..., bm) running max
        l_i = q.new_zeros(q_i.shape[:-1])  # (..., bm) running sum of exp(s - m_i)
        acc = torch.zeros_like(q_i)  # (..., bm, d) running sum of exp(s - m_i) v
        io.read(q_i)
        n_end = min(S, i0 + block_m) if causal else S  # later keys are masked for every row
        for j0 in range(0, n_end, block_n):
            k_j = k[..., j0:j0 + block_n, :]  # (..., bn, d)
            v_j = v[..., j0:j0 + block_n, :]  # (..., bn, d)
            io.read(k_j, v_j)  # read once per query block
            s_ij = (q_i @ k_j.transpose(-2, -1)) * scale  # (..., bm, bn) on chip only
            if causal:
                cols = torch.arange(j0, j0 + k_j.shape[-2], device=q.device)
                s_ij = s_ij.masked_fill(~visible(rows, cols), -math.inf)
            m_new = torch.maximum(m_i, s_ij.amax(dim=-1))  # (..., bm)
            alpha = torch.exp(m_i - m_new)  # (..., bm) rescales what was summed so far
            p_ij = torch.exp(s_ij - m_new[..., None])  # (..., bm, bn)
            l_i = alpha * l_i + p_ij.sum(dim=-1)
            acc = alpha[..., None] * acc + p_ij @ v_j  # (..., bm, d)
            m_i = m_new
        out[..., i0:i0 + block_m, :] = acc / l_i[..., None]  # normalize once, at the end
        lse[..., i0:i0 + block_m] = m_i + torch.log(l_i)
        io.write(out[..., i0:i0 + block_m, :], lse[..., i0:i0 + block_m])  # write once
    return out, lse
# [/attention:tiled]


def flash_attention_forward_paper(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
                                  causal: bool = False, scale: float | None = None,
                                  block_r: int = 64, block_c: int = 64,
                                  io: IOCount | None = None) -> torch.Tensor:
    """The first FlashAttention paper's Algorithm 1: key/value blocks outside, query blocks
    inside, with O, l and m kept in HBM and rescaled (normalized) after every block."""
    io = IOCount() if io is None else io
    scale = softmax_scale(q, scale)
    S = q.shape[-2]
    out = torch.zeros_like(q)  # (..., S, d) in HBM
    l = q.new_zeros(q.shape[:-1])  # (..., S) in HBM
    m = q.new_full(q.shape[:-1], -math.inf)  # (..., S) in HBM
    io.write(out, l, m)  # initialization
    for j0 in range(0, S, block_c):
        k_j, v_j = k[..., j0:j0 + block_c, :], v[..., j0:j0 + block_c, :]
        io.read(k_j, v_j)  # every key/value block is read once
        cols = torch.arange(j0, j0 + k_j.shape[-2], device=q.device)
        first_row = j0 if causal else 0  # causal: query blocks that end before j0 see no key here
        for i0 in range(first_row // block_r * block_r, S, block_r):
            sl = slice(i0, i0 + block_r)
            q_i, o_i, l_i, m_i = q[..., sl, :], out[..., sl, :], l[..., sl], m[..., sl]
            io.read(q_i, o_i, l_i, m_i)
            s_ij = (q_i @ k_j.transpose(-2, -1)) * scale  # (..., br, bc)
            if causal:
                rows = torch.arange(i0, i0 + q_i.shape[-2], device=q.device)
                s_ij = s_ij.masked_fill(~visible(rows, cols), -math.inf)
            m_ij = s_ij.amax(dim=-1)  # (..., br) -inf for a row that sees no key of this block
            # Causal, block_c not a multiple of block_r: the first rows of the first query block
            # may precede every key of the block. exp(-inf - (-inf)) would be NaN; with the max
            # taken as 0 those rows get p = 0 and l = 0, the empty state, and change nothing.
            m_safe = torch.where(m_ij == -math.inf, 0.0, m_ij)
            p_ij = torch.exp(s_ij - m_safe[..., None])
            l_ij = p_ij.sum(dim=-1)
            m_new = torch.maximum(m_i, m_ij)  # finite: every row saw key 0 in the first block
            a, b = torch.exp(m_i - m_new), torch.exp(m_ij - m_new)
            l_new = a * l_i + b * l_ij
            o_new = ((l_i * a)[..., None] * o_i + b[..., None] * (p_ij @ v_j)) / l_new[..., None]
            out[..., sl, :], l[..., sl], m[..., sl] = o_new, l_new, m_new
            io.write(o_new, l_new, m_new)
    return out


# [attention:backward]
def attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                       d_out: torch.Tensor, lse: torch.Tensor, *, causal: bool = False,
                       scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dQ, dK, dV of O = softmax(Q K^T * scale) V from the saved O and log-sum-exp, on whole
    matrices: five matmuls, of which the first recomputes the scores the forward threw away."""
    scale = softmax_scale(q, scale)
    s = (q @ k.transpose(-2, -1)) * scale  # (1) S = Q K^T, recomputed
    if causal:
        s = s.masked_fill(~visible(torch.arange(q.shape[-2]), torch.arange(k.shape[-2])), -math.inf)
    p = torch.exp(s - lse[..., None])  # P, rebuilt from one number per row
    dv = p.transpose(-2, -1) @ d_out  # (2) dV = P^T dO
    dp = d_out @ v.transpose(-2, -1)  # (3) dP = dO V^T
    delta = (d_out * out).sum(dim=-1)  # D = rowsum(dO * O) = rowsum(P * dP), one per row
    ds = p * (dp - delta[..., None])  # dS = P * (dP - D): the softmax Jacobian, row by row
    dq = (ds @ k) * scale  # (4) dQ = dS K
    dk = (ds.transpose(-2, -1) @ q) * scale  # (5) dK = dS^T Q
    return dq, dk, dv
# [/attention:backward]


# [attention:backward-tiled]
def flash_attention_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor,
                             d_out: torch.Tensor, lse: torch.Tensor, *, causal: bool = False,
                             scale: float | None = None, block_m: int = 64, block_n: int = 64,
                             key_block_order: list[int] | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`attention_backward` in FlashAttention-2's backward loop order.

    One program per key/value block (the outer loop) keeps dK_j and dV_j on chip and loops over
    the query blocks. dQ_i receives a contribution from every key block: on a GPU the programs
    add them into one fp32 buffer with atomics, in whatever order they happen to run, which
    ``key_block_order`` (a permutation of the key blocks) imitates. Causal masks assume
    S_q = S_k.
    """
    scale = softmax_scale(q, scale)
    S_q, S_k = q.shape[-2], k.shape[-2]
    delta = (d_out * out).sum(dim=-1)  # (..., S_q): a small pass of its own before the loop
    dq, dk, dv = torch.zeros_like(q), torch.empty_like(k), torch.empty_like(v)
    starts = list(range(0, S_k, block_n))
    for b in range(len(starts)) if key_block_order is None else key_block_order:
        j0 = starts[b]
        k_j, v_j = k[..., j0:j0 + block_n, :], v[..., j0:j0 + block_n, :]  # (..., bn, d) on chip
        dk_j, dv_j = torch.zeros_like(k_j), torch.zeros_like(v_j)  # accumulated on chip
        cols = torch.arange(j0, j0 + k_j.shape[-2])
        first = j0 // block_m * block_m if causal else 0  # earlier query blocks see no key here
        for i0 in range(first, S_q, block_m):
            sl = slice(i0, i0 + block_m)
            q_i, do_i = q[..., sl, :], d_out[..., sl, :]
            s_ij = (q_i @ k_j.transpose(-2, -1)) * scale  # (..., bm, bn)
            if causal:
                rows = torch.arange(i0, i0 + q_i.shape[-2])
                s_ij = s_ij.masked_fill(~visible(rows, cols), -math.inf)
            p_ij = torch.exp(s_ij - lse[..., sl, None])
            dv_j += p_ij.transpose(-2, -1) @ do_i
            ds_ij = p_ij * (do_i @ v_j.transpose(-2, -1) - delta[..., sl, None])
            dk_j += (ds_ij.transpose(-2, -1) @ q_i) * scale
            dq[..., sl, :] += (ds_ij @ k_j) * scale  # atomicAdd into HBM on a GPU
        dk[..., j0:j0 + block_n, :], dv[..., j0:j0 + block_n, :] = dk_j, dv_j  # written once
    return dq, dk, dv
# [/attention:backward-tiled]
