"""What a collective costs: the bytes each rank must send, and five all-reduce algorithms' time.

Bytes. For ``n`` ranks and an array of ``S`` bytes (the whole, unsharded array), a
bandwidth-optimal algorithm makes each rank send

* reduce-scatter: ``(n-1)/n · S`` (every other rank's share of this rank's contribution);
* all-gather: ``(n-1)/n · S`` (this rank's share, to every other rank);
* all-reduce = reduce-scatter + all-gather: ``2(n-1)/n · S``.

No algorithm does better: in a reduce-scatter each rank's ``S/n`` result depends on ``n-1``
other ranks' data, which must arrive over its links (Patarasuk and Yuan 2009 prove the
all-reduce bound). This is also the number nccl-tests divides by the time to report a *bus
bandwidth* (``busbw``): a figure comparable with the link's own bandwidth whatever ``n`` is.

Time (the α-β model: a message of ``m`` bytes costs ``α + m/B``; Thakur, Rabenseifner and
Gropp 2005) of an all-reduce of ``S`` bytes on ``n`` ranks, ``log`` being ⌈log₂ n⌉, reductions'
arithmetic left out:

=====================  ====================  ===========================================
algorithm              latency term          bandwidth term
=====================  ====================  ===========================================
ring                   2(n-1)·α              2(n-1)/n · S/B
recursive doubling     log·α                 log · S/B
Rabenseifner           2·log·α               2(n-1)/n · S/B   (halving, then doubling)
binomial tree          2·log·α               2·log · S/B      (reduce, then broadcast)
double binary tree     2·log·α               2 · S/B          (pipelined; Sanders et al.)
=====================  ====================  ===========================================

The ring and Rabenseifner's algorithm meet the bandwidth bound; the ring pays ``n`` times more
latency for it. A pipelined double binary tree (NCCL's "tree", Sanders, Speck and Träff 2009)
keeps logarithmic latency and sends about ``2S`` per rank: close to the bound for large ``n``.
Recursive doubling and Rabenseifner as written need ``n`` a power of two.
"""

from __future__ import annotations

import math
from fractions import Fraction

from infralens.tools.checks import require_positive

__all__ = ["ALLREDUCE_ALGORITHMS", "COLLECTIVES", "allreduce_time", "bus_bandwidth",
           "collective_bytes"]

#: The collectives :func:`collective_bytes` knows, and each one's factor of ``(n-1)/n · S``.
COLLECTIVES: dict[str, int] = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}

ALLREDUCE_ALGORITHMS: tuple[str, ...] = ("ring", "recursive_doubling", "rabenseifner",
                                         "binomial_tree", "double_binary_tree")


def _check_op(op: str) -> None:
    if op not in COLLECTIVES:
        raise ValueError(f"op must be one of {', '.join(COLLECTIVES)}; got {op!r}")


# [parallel:collective-bytes]
def collective_bytes(op: str, n: int, size_bytes: int) -> float:
    """Bytes each of ``n`` ranks sends in ``op`` on an array of ``size_bytes`` (the whole array).

    ``2(n-1)/n · S`` for ``"all_reduce"``, ``(n-1)/n · S`` for ``"reduce_scatter"`` and
    ``"all_gather"``: what a bandwidth-optimal algorithm (the ring) sends. One rank sends nothing.
    """
    _check_op(op)
    require_positive(n=n)
    if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes < 0:
        raise ValueError(f"size_bytes must be a non-negative integer, got {size_bytes!r}")
    return float(COLLECTIVES[op] * Fraction(n - 1, n) * size_bytes)
# [/parallel:collective-bytes]


def bus_bandwidth(op: str, n: int, size_bytes: int, seconds: float) -> float:
    """nccl-tests' bus bandwidth: :func:`collective_bytes` over the measured time, in B/s.

    (nccl-tests' ``algbw`` is ``size_bytes / seconds``; its ``busbw`` multiplies that by the
    factor above, which is the same number.)
    """
    if not seconds > 0:
        raise ValueError(f"seconds must be positive, got {seconds!r}")
    return collective_bytes(op, n, size_bytes) / seconds


# [parallel:allreduce-time]
def allreduce_time(algorithm: str, n: int, size_bytes: float, alpha: float, bandwidth: float) -> float:
    """Seconds for an all-reduce of ``size_bytes`` on ``n`` ranks, α-β model (module table).

    ``alpha``: seconds per message; ``bandwidth``: bytes per second of one rank's link, each way.
    """
    if algorithm not in ALLREDUCE_ALGORITHMS:
        raise ValueError(f"algorithm must be one of {', '.join(ALLREDUCE_ALGORITHMS)}; "
                         f"got {algorithm!r}")
    require_positive(n=n)
    if not (size_bytes >= 0 and alpha >= 0 and bandwidth > 0):
        raise ValueError("size_bytes and alpha must be >= 0 and bandwidth > 0")
    if n == 1:
        return 0.0
    log = math.ceil(math.log2(n))
    if algorithm in ("recursive_doubling", "rabenseifner") and 2**log != n:
        raise ValueError(f"{algorithm} as modelled here needs a power-of-two n, got {n}")
    S = size_bytes / bandwidth  # seconds to send the whole array once
    optimal = 2 * (n - 1) / n * S
    return {
        "ring": 2 * (n - 1) * alpha + optimal,
        "recursive_doubling": log * alpha + log * S,
        "rabenseifner": 2 * log * alpha + optimal,
        "binomial_tree": 2 * log * alpha + 2 * log * S,
        "double_binary_tree": 2 * log * alpha + 2 * S,
    }[algorithm]
# [/parallel:allreduce-time]
