"""ZeRO's per-GPU model-state memory (Rajbhandari et al., 2020), as one pure function.

Mixed-precision training keeps, for each of its Ψ parameters, a 16-bit weight (2 bytes), a
16-bit gradient (2 bytes) and K bytes of optimizer state (K = 12 for Adam: an fp32 master
weight, momentum and variance). Plain data parallelism over N_d GPUs replicates all of it on
every GPU. ZeRO's three stages partition one more line each across the N_d GPUs:

=======  ===========================  ==============================
stage    partitioned                  bytes per GPU
=======  ===========================  ==============================
``ddp``  nothing                      (2 + 2 + K) Ψ
1        optimizer states (P_os)      2Ψ + 2Ψ + KΨ/N_d
2        + gradients (P_os+g)         2Ψ + (2 + K)Ψ/N_d
3        + parameters (P_os+g+p)      (2 + 2 + K)Ψ/N_d
=======  ===========================  ==============================

A partitioned line holds ceil(Ψ/N_d) elements on each GPU: the flat buffer is padded to a
multiple of N_d so that every partition has the same size, and the largest partition is what
every GPU must have room for. Only the model states are counted: activations, buffers and
fragmentation are ZeRO-R's subject, not this table's.

>>> from infralens.memory import zero_model_state_bytes
>>> [zero_model_state_bytes(7_500_000_000, 64, s) / 1e9 for s in ("ddp", 1, 2, 3)]
[120.0, 31.40625, 16.640625, 1.875]
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from infralens.memory.report import Breakdown
from infralens.tools.checks import require_positive

#: The stages :func:`zero_model_state_bytes` accepts: plain data parallelism, then ZeRO 1 to 3.
STAGES: tuple[str | int, ...] = ("ddp", 1, 2, 3)


@dataclass(frozen=True)
class ZeroLines(Breakdown):
    """Bytes one GPU keeps for each model-state line."""

    weights: int
    gradients: int
    optimizer_states: int

    LINES = (("weights", "weights"), ("gradients", "gradients"),
             ("optimizer states", "optimizer_states"))


def check_stage(stage: object) -> str | int:
    """``stage`` if it is one of :data:`STAGES`, else ``ValueError`` in one line."""
    if isinstance(stage, bool) or stage not in STAGES:
        raise ValueError(f"stage must be one of 'ddp', 1, 2, 3; got {stage!r}")
    return stage  # type: ignore[return-value]


def zero_lines(
    num_params: int,
    dp: int,
    stage: str | int,
    k: int = 12,
    weight_bytes: int = 2,
    grad_bytes: int = 2,
) -> ZeroLines:
    """Per-GPU bytes of weights, gradients and optimizer states under ``stage`` (see module table).

    ``weight_bytes`` and ``grad_bytes`` default to ZeRO's 16-bit recipe; pass 4 and 4 (with
    ``k=8`` for Adam) for fp32 weights and gradients without a master copy.
    """
    require_positive(num_params=num_params, dp=dp, weight_bytes=weight_bytes, grad_bytes=grad_bytes)
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise ValueError(f"k must be a non-negative integer (bytes per parameter), got {k!r}")
    check_stage(stage)
    level = 0 if stage == "ddp" else int(stage)
    # [memory:zero-lines]
    shard = -(-num_params // dp)  # ceil(Ψ / N_d): elements in one GPU's partition
    optimizer = k * (shard if level >= 1 else num_params)  # P_os: stage 1 and up
    gradients = grad_bytes * (shard if level >= 2 else num_params)  # P_g: stage 2 and up
    weights = weight_bytes * (shard if level >= 3 else num_params)  # P_p: stage 3
    # [/memory:zero-lines]
    return ZeroLines(weights=weights, gradients=gradients, optimizer_states=optimizer)


def zero_model_state_bytes(num_params: int, dp: int, stage: str | int, k: int = 12) -> int:
    """Bytes of model state on each GPU for 16-bit weights and gradients and ``k`` optimizer bytes.

    ``stage`` is ``"ddp"`` (nothing partitioned) or ZeRO stage 1, 2 or 3. Raises ``ValueError``
    (one line) for a non-positive size or degree, a negative ``k`` or an unknown stage.
    """
    return zero_lines(num_params, dp, stage, k).total


def largest_model(capacity: int, dp: int, stage: str | int, k: int = 12) -> int:
    """The largest parameter count whose per-GPU model state fits ``capacity`` bytes.

    The inverse of :func:`zero_model_state_bytes` for ``dp`` GPUs under ``stage``, found by
    bisection on that function (so padding to a multiple of ``dp`` is respected): the question
    of the ZeRO paper's Table 2. Returns 0 when not even one parameter fits.
    """
    require_positive(capacity=capacity)
    lo, hi = 0, 1  # 0: not even one parameter fits
    while zero_model_state_bytes(hi, dp, stage, k) <= capacity:  # find a size that does not fit
        hi *= 2
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if zero_model_state_bytes(mid, dp, stage, k) <= capacity:
            lo = mid
        else:
            hi = mid - 1
    return lo


def as_printed(value: float, printed: str, rounding: str) -> str:
    """``value`` rounded with ``rounding`` (a :mod:`decimal` mode, e.g. ``ROUND_HALF_UP``) to as
    many decimals as the string ``printed`` shows, formatted like it: how a paper's table entry
    is compared with a computed value (``as_printed(31.40625, "31.4", ROUND_HALF_UP) == "31.4"``)."""
    decimals = len(printed.partition(".")[2])
    quantum = Decimal(1).scaleb(-decimals)
    return f"{Decimal(value).quantize(quantum, rounding=rounding):.{decimals}f}"
