"""Lab 08: per-GPU model-state memory and per-step communication under DDP, ZeRO and FSDP.

    python -m infralens.training.zero_memory_accounting --params 7.5B --dp 64
    python -m infralens.training.zero_memory_accounting --params 70B --dp 64 --shard-group 8
    python -m infralens.training.zero_memory_accounting --params 1.1B --dp 2 --precision fp32

Given the parameter count Ψ, the data-parallel degree N_d, the optimizer's bytes per parameter K
and the precision of weights and gradients, it prints what one GPU keeps of each model-state
line under each scheme, and how many bytes each GPU sends per step. The ZeRO stages come from
:func:`infralens.memory.zero.zero_lines`; this module maps FSDP's sharding strategies onto them,
adds the communication volume, and knows how FSDP2 actually cuts a tensor (``torch.chunk`` on
dim 0), so a measured shard can be checked to the element.

Bad input (a non-positive size, ``--dp 0``, an unknown scheme, a shard group that does not
divide N_d) prints one line, ``infralens.training.zero_memory_accounting: error: <reason>``,
on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from infralens.memory.zero import ZeroLines, zero_lines
from infralens.tools.checks import require_positive
from infralens.tools.cli import (
    MAX_INT,
    OneLineParser,
    UsageError,
    non_negative_int,
    positive_int,
    run_main,
    shown,
)

PROG = "infralens.training.zero_memory_accounting"

#: (weight bytes, gradient bytes, default K) for each precision recipe.
PRECISIONS: dict[str, tuple[int, int, int]] = {
    "mixed": (2, 2, 12),  # ZeRO: 16-bit weights and grads; fp32 master, momentum, variance
    "fp32": (4, 4, 8),  # fp32 weights and grads (or autocast): Adam's two fp32 moments only
}


@dataclass(frozen=True)
class Scheme:
    """One way to lay model state out over N_d data-parallel GPUs."""

    name: str
    stage: str | int  # which lines are partitioned, as a ZeRO stage
    collectives: str  # what one step sends
    sent: float  # the paper's per-step volume, in units of Ψ elements
    note: str


# [zero:schemes]
SCHEMES: dict[str, Scheme] = {s.name: s for s in (
    Scheme("ddp", "ddp", "all-reduce(grads)", 2, "everything replicated"),
    Scheme("zero1", 1, "reduce-scatter(grads) + all-gather(params)", 2, "optimizer states sharded"),
    Scheme("zero2", 2, "reduce-scatter(grads) + all-gather(params)", 2, "+ gradients sharded"),
    Scheme("zero3", 3, "all-gather(params) x2 + reduce-scatter(grads)", 3, "+ parameters sharded"),
    Scheme("fsdp-full", 3, "all-gather(params) x2 + reduce-scatter(grads)", 3,
           "FULL_SHARD / fully_shard(reshard_after_forward=True): ZeRO-3"),
    Scheme("fsdp-grad-op", 2, "all-gather(params) + reduce-scatter(grads)", 2,
           "SHARD_GRAD_OP / reshard_after_forward=False: params stay gathered from forward "
           "to backward, so the peak is ZeRO-2's"),
    Scheme("fsdp-hybrid", 3, "ZeRO-3 inside a shard group + all-reduce(grad shard) across groups", 3,
           "HYBRID_SHARD: ZeRO-3 over a group of G GPUs, replicated over N_d / G groups"),
)}
# [/zero:schemes]


@dataclass(frozen=True)
class ModelState(ZeroLines):
    """Bytes one GPU keeps for each model-state line (:class:`ZeroLines`) under one scheme."""

    scheme: str
    dp: int
    shard_degree: int  # GPUs a sharded line is split over (G for hybrid, N_d otherwise)


@dataclass(frozen=True)
class CommVolume:
    """What one GPU sends in one step (ring collectives), and the paper's round figure."""

    scheme: str
    paper_elements: float  # 2Ψ or 3Ψ: the ZeRO paper's per-step data movement
    bytes_sent: float  # per GPU, ring algorithms: each collective sends (n - 1)/n of its data
    collectives: str


def _check_scheme(scheme: str) -> Scheme:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {', '.join(SCHEMES)}; got {scheme!r}")
    return SCHEMES[scheme]


def _check_group(dp: int, shard_group: int | None) -> int:
    if shard_group is None:
        raise ValueError("fsdp-hybrid needs shard_group, the GPUs one copy is sharded over")
    require_positive(shard_group=shard_group)
    if dp % shard_group:
        raise ValueError(f"shard group {shard_group} does not divide the data-parallel degree {dp}")
    return shard_group


def model_state_per_gpu(
    num_params: int,
    dp: int,
    scheme: str,
    *,
    k: int | None = None,
    precision: str = "mixed",
    shard_group: int | None = None,
) -> ModelState:
    """Per-GPU bytes of weights, gradients and optimizer states (``k`` defaults by precision).

    ``fsdp-grad-op`` is counted at its peak, between forward and backward, when every
    parameter is gathered: the memory of ZeRO-2. At rest (outside forward and backward) it keeps
    only shards, like ZeRO-3.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    weight_bytes, grad_bytes, default_k = PRECISIONS[precision]
    spec = _check_scheme(scheme)
    degree = _check_group(dp, shard_group) if scheme == "fsdp-hybrid" else dp
    lines = zero_lines(num_params, degree, spec.stage, default_k if k is None else k,
                       weight_bytes=weight_bytes, grad_bytes=grad_bytes)
    return ModelState(**asdict(lines), scheme=scheme, dp=dp,
                      shard_degree=1 if spec.stage == "ddp" else degree)


def comm_volume(
    num_params: int, dp: int, scheme: str, *, elem_bytes: int = 2, shard_group: int | None = None
) -> CommVolume:
    """Bytes each GPU sends per step with ring collectives, and the paper's 2Ψ or 3Ψ.

    A ring all-reduce over n GPUs is a reduce-scatter then an all-gather; each sends (n - 1)/n
    of the data, so the all-reduce sends 2(n - 1)/n of it: the "2Ψ" of DDP.
    """
    require_positive(num_params=num_params, dp=dp, elem_bytes=elem_bytes)
    spec = _check_scheme(scheme)
    # [zero:comm]
    ring = (dp - 1) / dp  # one reduce-scatter or one all-gather sends this fraction of the data
    if scheme == "fsdp-hybrid":
        g = _check_group(dp, shard_group)
        r = dp // g  # replicas of each shard
        inside = 3 * (g - 1) / g * num_params  # ZeRO-3 inside the shard group
        across = 2 * (r - 1) / r * num_params / g  # all-reduce of this GPU's gradient shard
        elements = inside + across
    else:
        elements = spec.sent * ring * num_params  # 2 or 3 collectives' worth of Ψ
    # [/zero:comm]
    return CommVolume(scheme, spec.sent * num_params, elements * elem_bytes, spec.collectives)


def fsdp_shard_rows(dim0: int, world: int) -> list[int]:
    """Rows of a dim-0 size that each rank of ``world`` holds under FSDP2 (``torch.chunk``).

    ``torch.chunk`` makes chunks of ceil(dim0 / world) rows and may make fewer than ``world``;
    FSDP2 gives the missing ranks empty shards, and pads every shard's storage to the first.
    """
    if not isinstance(dim0, int) or dim0 < 0:
        raise ValueError(f"dim0 must be a non-negative integer, got {dim0!r}")
    require_positive(world=world)
    chunk = -(-dim0 // world)
    return [max(0, min(chunk, dim0 - r * chunk)) for r in range(world)]


def fsdp_local_numel(shapes: Iterable[Sequence[int]], world: int, rank: int) -> tuple[int, int]:
    """(elements rank ``rank`` holds, elements its padded storage holds) for these parameters."""
    if not 0 <= rank < world:
        raise ValueError(f"rank must be in [0, {world}), got {rank}")
    held = padded = 0
    for shape in shapes:
        rest = math.prod(shape[1:]) if len(shape) > 1 else 1
        rows = fsdp_shard_rows(shape[0] if shape else 1, world)
        held += rows[rank] * rest
        padded += rows[0] * rest
    return held, padded


# --- command line --------------------------------------------------------------------------------

_COUNT = re.compile(r"^(?P<num>[0-9]*\.?[0-9]+(?:e[0-9]+)?)(?P<unit>[KMBT]?)$", re.IGNORECASE)
_UNITS = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def parse_count(text: str) -> int:
    """'7.5B', '7.5e9', '175000000000' -> an exact positive integer count."""
    if text.strip().startswith("-"):
        raise argparse.ArgumentTypeError(f"a parameter count must be positive, got {shown(text)}")
    match = _COUNT.match(text.strip().replace("_", "").replace(",", ""))
    if not match:
        raise argparse.ArgumentTypeError(f"expected a parameter count like 7.5B or 7.5e9, got {shown(text)}")
    from fractions import Fraction

    num = match.group("num")
    if "e" in num.lower() and len(num.lower().split("e")[1]) > 3:  # 1e99999999 is not a count
        raise argparse.ArgumentTypeError(f"a parameter count must be at most 2**63 - 1, got {shown(text)}")
    value = Fraction(num) * _UNITS[match.group("unit").upper()]
    if value.denominator != 1 or value <= 0:
        raise argparse.ArgumentTypeError(
            f"a parameter count must be a positive whole number, got {shown(text)}")
    if value > MAX_INT:
        raise argparse.ArgumentTypeError(f"a parameter count must be at most 2**63 - 1, got {shown(text)}")
    return int(value)






def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=f"python -m {PROG}",
        description="Per-GPU model-state memory and per-step communication: DDP, ZeRO-1/2/3, FSDP.",
        epilog=f"Bad input prints one line, '{PROG}: error: <reason>', and exits 2.",
    )
    parser.add_argument("--params", required=True, type=parse_count, metavar="PSI",
                        help="parameter count: 7.5B, 7.5e9 or 7500000000")
    parser.add_argument("--dp", required=True, type=positive_int, metavar="N_D",
                        help="data-parallel degree (GPUs sharing the model state)")
    parser.add_argument("--precision", choices=tuple(PRECISIONS), default="mixed",
                        help="mixed: 2-byte weights and grads (K = 12); fp32: 4 and 4 (K = 8)")
    parser.add_argument("--k", type=non_negative_int, metavar="K",
                        help="optimizer bytes per parameter (default: 12 mixed, 8 fp32)")
    parser.add_argument("--shard-group", type=positive_int, metavar="G",
                        help="fsdp-hybrid: GPUs one copy is sharded over (must divide --dp)")
    parser.add_argument("--schemes", default=",".join(SCHEMES), metavar="LIST",
                        help=f"comma-separated subset of {', '.join(SCHEMES)}")
    return parser


def _gb(n: float) -> str:
    return f"{n / 1e9:,.2f}"


def render(args: argparse.Namespace) -> str:
    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    for name in schemes:
        _check_scheme(name)
    if args.shard_group is None:
        schemes = [s for s in schemes if s != "fsdp-hybrid"]
    else:
        _check_group(args.dp, args.shard_group)
    if not schemes:
        raise UsageError("no scheme left to show (fsdp-hybrid needs --shard-group)")
    weight_bytes, _, default_k = PRECISIONS[args.precision]
    k = default_k if args.k is None else args.k
    psi = args.params
    rows = []
    base = model_state_per_gpu(psi, args.dp, "ddp", k=k, precision=args.precision).total
    for name in schemes:
        st = model_state_per_gpu(psi, args.dp, name, k=k, precision=args.precision,
                                 shard_group=args.shard_group)
        comm = comm_volume(psi, args.dp, name, elem_bytes=weight_bytes, shard_group=args.shard_group)
        rows.append((name, _gb(st.weights), _gb(st.gradients), _gb(st.optimizer_states),
                     _gb(st.total), f"{base / st.total:.1f}x", f"{comm.paper_elements / psi:g} Psi",
                     _gb(comm.bytes_sent)))
    header = ("scheme", "weights", "grads", "optimizer", "total GB", "vs DDP", "paper", "sent GB")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"Psi = {psi:,} parameters, N_d = {args.dp}, {args.precision} precision "
        f"({weight_bytes} B weights and grads), K = {k}"
        + (f", shard group {args.shard_group}" if args.shard_group else ""),
        "Per GPU, model states only (GB = 1e9 bytes); 'sent' is what each GPU sends per step "
        "with ring collectives.",
        "  ".join(h.ljust(w) if i == 0 else h.rjust(w)
                  for i, (h, w) in enumerate(zip(header, widths, strict=True))),
    ]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths, strict=True))))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 for bad input)."""
    return run_main(PROG, argv, lambda a: render(build_parser().parse_args(a)), print)


if __name__ == "__main__":
    sys.exit(main())
