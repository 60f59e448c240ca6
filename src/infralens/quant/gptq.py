"""GPTQ: quantize a linear layer's weights one input column at a time, and after each column move
the rounding error onto the columns not yet quantized, so the layer's *outputs* on calibration
data stay close (Frantar et al., 2023, after Optimal Brain Surgeon, Hassibi and Stork, 1993).

For one row ``w`` of ``W`` (N, K) and calibration inputs ``X`` (n, K), the layer's squared output
error ``||(w - w') X^T||^2`` has the Hessian ``H = 2 X^T X`` (K, K). Quantizing input ``q`` to
``quant(w_q)`` and letting the remaining weights move optimally costs

    delta L = (w_q - quant(w_q))^2 / (2 [H^-1]_qq),    with the update
    delta w = -(w_q - quant(w_q)) / [H^-1]_qq * H^-1[q, :],

and the inverse Hessian of the columns left is the previous one with row and column ``q``
eliminated. GPTQ quantizes the columns in a fixed order, reads every row of those successive
inverses from one upper Cholesky factor of ``H^-1`` (they are its rows, scaled), and applies the
updates to later blocks of columns lazily, one matrix product per block.

:func:`gptq_quantize` is that algorithm; :func:`obs_reference` is the same sequence done the slow
way (an explicit inverse per column), which the tests compare it with.
"""

from __future__ import annotations

import torch

from infralens.quant.affine import quantize

__all__ = ["gptq_quantize", "obs_reference", "hessian", "layer_error"]


def hessian(x: torch.Tensor, damp: float = 0.01) -> torch.Tensor:
    """``2 X^T X`` (K, K) in float64, with ``damp`` times its mean diagonal added to the diagonal
    (GPTQ's dampening, which keeps the Cholesky factorization stable)."""
    x = x.reshape(-1, x.shape[-1]).double()
    h = 2 * x.T @ x
    return h + damp * h.diagonal().mean() * torch.eye(h.shape[0], dtype=h.dtype, device=h.device)


def layer_error(w: torch.Tensor, w_q: torch.Tensor, x: torch.Tensor) -> float:
    """``||(W - W_q) X^T||_F^2``: the squared output error of the layer on inputs ``x``."""
    x = x.reshape(-1, x.shape[-1]).double()
    return float(((w.double() - w_q.double()) @ x.T).pow(2).sum())


def _column_quantizer(w: torch.Tensor, bits: int, symmetric: bool):
    """Scales and zeros per row from ``w`` (N, g): quantize any column with them."""
    qt = quantize(w, bits, "channel", symmetric=symmetric)
    scale, zero = qt.scale, qt.zero                    # (N, 1)
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if symmetric else (0, 2**bits - 1)

    def quant(col: torch.Tensor) -> torch.Tensor:
        q = torch.clamp(torch.round(col[:, None] / scale) + zero, lo, hi)
        return ((q - zero) * scale)[:, 0]
    return quant


# [quant:gptq]
def gptq_quantize(w: torch.Tensor, x: torch.Tensor, bits: int, group_size: int | None = None,
                  symmetric: bool = True, block_size: int = 128, damp: float = 0.01
                  ) -> torch.Tensor:
    """GPTQ-quantize ``w`` (N, K) for inputs ``x`` (..., K); returns the dequantized weights
    (float64). Scales are per output channel, or per group of ``group_size`` inputs computed when
    the group's first column is reached (from the weights as updated so far)."""
    W = w.detach().double().clone()
    n, k = W.shape
    if group_size and (k % group_size or block_size % group_size):
        raise ValueError(f"group_size must divide in_features={k} and block_size={block_size}")
    H = hessian(x, damp)
    U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    quant = None if group_size else _column_quantizer(W, bits, symmetric)
    Q = torch.zeros_like(W)
    for b0 in range(0, k, block_size):
        b1 = min(b0 + block_size, k)
        Wb, Eb = W[:, b0:b1].clone(), torch.zeros(n, b1 - b0, dtype=W.dtype, device=W.device)
        for i in range(b1 - b0):
            col = b0 + i
            if group_size and col % group_size == 0:
                quant = _column_quantizer(Wb[:, i:i + group_size], bits, symmetric)
            Q[:, col] = quant(Wb[:, i])
            err = (Wb[:, i] - Q[:, col]) / U[col, col]
            Wb[:, i:] -= err[:, None] * U[col, col:b1][None, :]      # update the block now
            Eb[:, i] = err
        W[:, b1:] -= Eb @ U[b0:b1, b1:]                              # and later blocks lazily
    return Q
# [/quant:gptq]


def obs_reference(w: torch.Tensor, x: torch.Tensor, bits: int, symmetric: bool = True,
                  damp: float = 0.01) -> torch.Tensor:
    """The same column order and per-channel scales as :func:`gptq_quantize`, done the slow way:
    invert the Hessian of the columns still free before each column (no Cholesky, no blocks)."""
    W = w.detach().double().clone()
    k = W.shape[1]
    H = hessian(x, damp)
    quant = _column_quantizer(W, bits, symmetric)
    for col in range(k):
        Hinv = torch.linalg.inv(H[col:, col:])
        q = quant(W[:, col])
        err = (W[:, col] - q) / Hinv[0, 0]
        W[:, col:] -= err[:, None] * Hinv[0][None, :]
        W[:, col] = q
    return W
