"""Megatron-LM's closed forms for a GPT model's size, work and training time.

Narayanan et al. (2021), section 5.1, count a GPT model of ``l`` layers, hidden size ``h``,
vocabulary ``V`` and sequence length ``s`` (learned positions, a 4h GELU MLP, biases) and train
it with batch ``B`` sequences per iteration. Korthikanti et al. (2022), section 6, refine the
FLOPs for their recomputation schemes. Everything here is exact integer arithmetic on those
closed forms; :mod:`infralens.transformer.flops` counts the same FLOPs for a real config.

The per-layer matmul FLOPs of one forward pass are ``24Bsh² + 4Bs²h``: ``2·12h²`` per token for
the four ``h x h`` projections (QKV is ``h x 3h``, the output ``h x h``) and the two ``h x 4h``
MLP matrices, plus ``2Bs²h`` each for ``QKᵀ`` and ``PV``. The logit layer costs ``2BshV``. A
backward pass costs twice its forward (two matmuls per forward matmul), so

* model FLOPs, no recomputation: ``3x`` forward  = 72Bslh² (1 + s/(6h) + V/(12lh));
* hardware FLOPs with selective recompute, as Korthikanti et al. print them (Eq. 8):
  72Bslh² (1 + s/(3h) + V/(12lh)). The paper's term adds ``12Bs²lh``, the whole ``s/(6h)`` term
  again; a rerun of the forward ``QKᵀ`` and ``PV`` alone is ``4Bs²lh``, and the planner counts
  that (:mod:`infralens.parallel.plan`);
* full recompute reruns each layer's whole forward: ``4x`` the layers' forward, ``3x`` the
  logits: 96Bslh² (1 + s/(6h) + V/(16lh)).
"""

from __future__ import annotations

from fractions import Fraction

from infralens.tools.checks import require_positive
from infralens.transformer.flops import palm_flops_per_token

__all__ = ["RECOMPUTE", "megatron_params", "mfu", "palm_flops_per_token", "training_days",
           "training_flops"]

#: The recomputation schemes :func:`training_flops` counts.
RECOMPUTE: tuple[str, ...] = ("none", "selective", "full")

SECONDS_PER_DAY = 86_400


# [parallel:megatron-formulas]
def megatron_params(layers: int, hidden: int, vocab: int, seq: int) -> int:
    """Parameters of the GPT model, Narayanan et al. Eq. (2): 12lh²(1 + 13/(12h) + (V+s)/(12lh)).

    Expanded: ``12lh²`` matrix weights, ``13lh`` biases and LayerNorm gains per layer (9h of
    biases, 4h of two LayerNorms), and ``(V + s)h`` for the token and position embeddings.
    """
    require_positive(layers=layers, hidden=hidden, vocab=vocab, seq=seq)
    l, h = layers, hidden
    return 12 * l * h * h + 13 * l * h + (vocab + seq) * h


def training_flops(batch: int, seq: int, layers: int, hidden: int, vocab: int,
                   recompute: str = "none") -> int:
    """FLOPs of one training iteration on ``batch`` sequences of ``seq`` tokens.

    ``"none"``: model FLOPs, Korthikanti et al. Eq. (7), 72Bslh²(1 + s/(6h) + V/(12lh)).
    ``"selective"``: hardware FLOPs with selective recompute, Korthikanti et al. Eq. (8),
    72Bslh²(1 + s/(3h) + V/(12lh)).
    ``"full"``: with full recomputation, Narayanan et al. Eq. (3), 96Bslh²(1 + s/(6h) + V/(16lh)).
    """
    require_positive(batch=batch, seq=seq, layers=layers, hidden=hidden, vocab=vocab)
    if recompute not in RECOMPUTE:
        raise ValueError(f"recompute must be one of {', '.join(RECOMPUTE)}; got {recompute!r}")
    B, s, l, h, V = batch, seq, layers, hidden, vocab
    layer_fwd = 24 * B * s * l * h * h + 4 * B * s * s * l * h  # projections + MLP; QKᵀ and PV
    logits_fwd = 2 * B * s * h * V
    if recompute == "none":
        return 3 * (layer_fwd + logits_fwd)
    if recompute == "selective":  # Eq. (8) as printed: the s/(6h) term doubles to s/(3h)
        return 3 * (layer_fwd + logits_fwd) + 12 * B * s * s * l * h
    return 4 * layer_fwd + 3 * logits_fwd


def training_days(tokens: float, params: float, n_gpus: int, flops_per_gpu: float) -> float:
    """Days to train ``params`` parameters on ``tokens`` tokens, Narayanan et al. Eq. (4): 8TP/(nX).

    ``8TP`` is Eq. (3)'s FLOPs per token (``96Bslh² / (Bs)`` with ``P ≈ 12lh²``: ``8P``) summed
    over ``T`` tokens, the work with full recomputation; ``X`` is the achieved FLOP/s per GPU.
    """
    require_positive(n_gpus=n_gpus)
    if not (tokens > 0 and params > 0 and flops_per_gpu > 0):
        raise ValueError("tokens, params and flops_per_gpu must be positive")
    return 8 * tokens * params / (n_gpus * flops_per_gpu) / SECONDS_PER_DAY


def mfu(tokens_per_s: float, flops_per_token: float, n_gpus: int, peak_flops_per_gpu: float) -> float:
    """Model FLOPs utilization: the model FLOPs a run completes per second over the peak it owns.

    Model FLOPs, not hardware FLOPs: recomputation does not count (Chowdhery et al. 2022, App. B).
    """
    require_positive(n_gpus=n_gpus)
    if not (tokens_per_s >= 0 and flops_per_token > 0 and peak_flops_per_gpu > 0):
        raise ValueError("tokens_per_s must be >= 0, flops_per_token and the peak positive")
    return float(Fraction(tokens_per_s) * Fraction(flops_per_token)
                 / (n_gpus * Fraction(peak_flops_per_gpu)))
# [/parallel:megatron-formulas]
