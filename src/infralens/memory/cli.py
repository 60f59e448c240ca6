"""``python -m infralens.memory``: parameter count, training ledger and inference ledger.

Pick a model in one of three ways:

    python -m infralens.memory --model llama-3-8b
    python -m infralens.memory --hf-config path/to/config.json
    python -m infralens.memory --family llama --hidden 4096 --layers 32 --heads 32 \\
        --kv-heads 8 --ffn 14336 --vocab 128256

Bad input (a missing key, heads that do not divide the hidden size, a negative size, an
unknown model_type, a missing file, malformed JSON, a bad flag) prints exactly one line,
``infralens.memory: error: <reason>``, on stderr and exits with status 2. Never a traceback:
the mistake is in the input, and the message says which.
"""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

from infralens.memory.activations import RECOMPUTE_MODES
from infralens.memory.ledger import (
    NOT_IN_LEDGER,
    OPTIMIZER_STATE_BYTES,
    PRECISION_BYTES,
    inference_ledger,
    training_estimate,
)
from infralens.memory.params import count_parameters
from infralens.memory.report import format_table, human_count
from infralens.models.config import SUPPORTED_FAMILIES, ModelShape, load_config
from infralens.models.shipped import shipped_config, shipped_config_names
from infralens.tools.cli import OneLineParser, UsageError, positive_int, run_main

PROG = "infralens.memory"
DEFAULT_SEQ_LEN = 2048








def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=f"python -m {PROG}",
        description="Parameter count, training ledger and inference ledger of a transformer.",
        epilog="Bad input prints one line, 'infralens.memory: error: <reason>', and exits 2.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--hf-config", metavar="PATH", help="a Hugging Face config.json")
    source.add_argument(
        "--model",
        metavar="NAME",
        choices=shipped_config_names(),
        help=f"a shipped config: {', '.join(shipped_config_names())}",
    )
    source.add_argument(
        "--family", choices=SUPPORTED_FAMILIES, help="build a synthetic config of this family"
    )

    synthetic = parser.add_argument_group("synthetic config (with --family)")
    size = {"type": positive_int}
    synthetic.add_argument("--hidden", metavar="D", **size, help="hidden size d_model")
    synthetic.add_argument("--layers", metavar="L", **size, help="transformer blocks")
    synthetic.add_argument("--heads", metavar="N", **size, help="query heads")
    synthetic.add_argument("--vocab", metavar="V", **size, help="vocabulary size")
    synthetic.add_argument("--ffn", metavar="F", **size, help="MLP width (gpt2: 4 x hidden)")
    synthetic.add_argument("--kv-heads", metavar="N", **size, help="key/value heads (GQA)")
    synthetic.add_argument("--head-dim", metavar="N", **size, help="explicit head width")
    synthetic.add_argument("--positions", metavar="P", **size, help="gpt2: learned positions")
    synthetic.add_argument("--experts", metavar="E", **size, help="mixtral: experts per layer")
    synthetic.add_argument(
        "--experts-per-token", metavar="K", **size, help="mixtral: experts each token uses"
    )
    synthetic.add_argument(
        "--tie",
        action=argparse.BooleanOptionalAction,
        help="tie the LM head to the token embedding (default: as the family does)",
    )

    run = parser.add_argument_group("workload")
    run.add_argument("--batch", metavar="B", **size, default=1, help="sequences (default 1)")
    run.add_argument("--seq-len", metavar="S", **size,
                     help=f"tokens (default {DEFAULT_SEQ_LEN}, or a learned position table's rows "
                          "if fewer)")
    run.add_argument(
        "--optimizer", choices=tuple(OPTIMIZER_STATE_BYTES), default="adamw",
        help="optimizer state: 0, 4 or 8 bytes per parameter (default adamw)",
    )
    run.add_argument(
        "--precision", choices=tuple(PRECISION_BYTES), default="mixed",
        help="mixed: 16-bit weights + fp32 master copy; amp: torch.autocast (default mixed)",
    )
    run.add_argument("--tp", metavar="T", **size, default=1, help="tensor-parallel size")
    run.add_argument("--sequence-parallel", action="store_true", help="with --tp")
    run.add_argument(
        "--recompute", choices=RECOMPUTE_MODES, default="none",
        help="activation recomputation (default none)",
    )
    run.add_argument(
        "--weight-bytes", metavar="N", **size, default=2, help="inference: bytes per weight"
    )
    run.add_argument(
        "--kv-bytes", metavar="N", **size, default=2, help="inference: bytes per KV element"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 for bad input)."""
    parser = build_parser()
    # ConfigError is a ValueError: the config loader's messages are one line too.
    return run_main(PROG, argv, lambda a: _report(parser.parse_args(a)), print)


def _report(args: argparse.Namespace) -> str:
    name, shape = _resolve_model(args)
    return render_report(name, shape, args)


def _seq_len(name: str, shape: ModelShape, requested: int | None) -> int:
    """``--seq-len``, or its default; a model with a learned position table (GPT-2) has no
    position past its rows, so a longer sequence is refused."""
    if requested is None:
        return min(DEFAULT_SEQ_LEN, shape.max_positions or DEFAULT_SEQ_LEN)
    if shape.max_positions and requested > shape.max_positions:
        raise UsageError(f"--seq-len {requested:,} is past {name}'s {shape.max_positions:,} "
                         "positions: its learned position table has no row for a later token")
    return requested


def _resolve_model(args: argparse.Namespace) -> tuple[str, ModelShape]:
    if args.model:
        return args.model, load_config(shipped_config(args.model))
    if args.hf_config:
        return args.hf_config, load_config(args.hf_config)
    return f"synthetic {args.family}", load_config(_synthetic_config(args))


def _synthetic_config(args: argparse.Namespace) -> dict[str, Any]:
    """A config.json dict with the family's real Hugging Face key names."""
    family = args.family
    needed = ["hidden", "layers", "heads", "vocab"]
    needed += ["positions"] if family == "gpt2" else ["ffn"]
    allowed = set(needed) | {"tie"}
    allowed |= {"ffn"} if family == "gpt2" else {"kv_heads", "head_dim"}
    allowed |= {"experts", "experts_per_token"} if family == "mixtral" else set()
    for flag in needed:
        if getattr(args, flag) is None:
            raise UsageError(f"--family {family} needs --{flag.replace('_', '-')}")
    for flag in ("ffn", "kv_heads", "head_dim", "positions", "experts", "experts_per_token"):
        if getattr(args, flag) is not None and flag not in allowed:
            raise UsageError(f"--{flag.replace('_', '-')} does not apply to --family {family}")

    if family == "gpt2":
        keys = {"n_embd": args.hidden, "n_layer": args.layers, "n_head": args.heads,
                "n_positions": args.positions, "n_inner": args.ffn}
    else:
        keys = {"hidden_size": args.hidden, "num_hidden_layers": args.layers,
                "num_attention_heads": args.heads, "intermediate_size": args.ffn,
                "num_key_value_heads": args.kv_heads, "head_dim": args.head_dim,
                "num_local_experts": args.experts, "num_experts_per_tok": args.experts_per_token}
    keys |= {"vocab_size": args.vocab, "tie_word_embeddings": args.tie}
    # Leave out what was not given, so the family's Hugging Face defaults apply.
    return {"model_type": family} | {k: v for k, v in keys.items() if v is not None}


def render_report(name: str, shape: ModelShape, args: argparse.Namespace) -> str:
    """The three tables: parameters, training ledger, inference ledger."""
    args = argparse.Namespace(**{**vars(args), "seq_len": _seq_len(name, shape, args.seq_len)})
    params = count_parameters(shape)
    training = training_estimate(
        shape, args.batch, args.seq_len, optimizer=args.optimizer, precision=args.precision,
        t=args.tp, sequence_parallel=args.sequence_parallel, recompute=args.recompute,
    )
    inference = inference_ledger(
        shape, args.batch, args.seq_len,
        weight_bytes_per_param=args.weight_bytes, kv_bytes_per_elem=args.kv_bytes,
    )
    tokens = f"batch {args.batch} x {args.seq_len:,} tokens"
    activations = f"activations: recompute {args.recompute}"
    if args.tp > 1 or args.sequence_parallel:
        split = " + sequence parallel" if args.sequence_parallel else ""
        activations += f", tensor parallel {args.tp}{split} (per GPU)"
    header = (
        f"{name} ({shape.family}): d_model {shape.d_model}, {shape.n_layers} layers, "
        f"{shape.n_heads} heads ({shape.n_kv_heads} KV, head_dim {shape.head_dim}), "
        f"d_ff {shape.d_ff}, vocab {shape.vocab_size}"
        + (f", {shape.n_experts} experts (top-{shape.experts_per_token})" if shape.is_moe else "")
        + (", tied embeddings" if shape.tie_embeddings else "")
    )
    return "\n\n".join(
        (
            header,
            format_table("Parameters", params.rows(), humanize=human_count, unit="params"),
            format_table(
                f"Training: {args.optimizer}, {args.precision} precision "
                f"({training.ledger.bytes_per_param} B/param), {tokens}\n  {activations}",
                training.rows(),
            ),
            format_table(
                f"Inference: {tokens}, weights {args.weight_bytes} B/param, "
                f"KV cache {args.kv_bytes} B/element",
                inference.rows(),
            ),
            textwrap.fill("Not in these ledgers: " + "; ".join(i for i, _ in NOT_IN_LEDGER) + "."),
        )
    )
