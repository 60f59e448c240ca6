"""Lab 11: run a quantization comparison plan and report, for every cell of its matrix, the weight
bytes and the perplexity the quantized model reaches on held-out text.

    python -m infralens.quant.compare                       # the shipped small plan, on the CPU
    python -m infralens.quant.compare my_plan.yaml --models narrow --out results.json
    python -m infralens.quant.compare --plan full --device cuda

For each model of the plan the runner trains a GPT on the standard library's source (bytes,
:mod:`infralens.training.text`), measures its perplexity on held-out files, records how large each
linear layer's input channels get (the activation outliers), then quantizes it once per cell
(:func:`infralens.quant.apply.quantize_model`) and measures again. Rows are relative to the FP32
model, each with the standard error of its change over the held-out windows; a BF16 row (the block
weights rounded to BF16) is a sanity check, a change that should cost nothing.

A plan that cannot be run (not YAML, an unknown method or format, a granularity the method does
not take, a size that is not a positive integer, a model the plan does not name) prints one line,
``infralens.quant.compare: error: <reason>``, and exits with status 2 before anything is trained.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence

import torch

from infralens.models.gpt import GPTConfig
from infralens.quant.apply import (
    QuantLinear,
    block_linears,
    channel_absmax,
    paired_change,
    quantize_model,
    weight_bytes,
    window_losses,
)
from infralens.quant.plan import ModelSpec, Plan, PlanError, load_plan, shipped_plan
from infralens.tools.cli import OneLineParser, UsageError, output_path, run_main, write_json
from infralens.training.text import BYTE_VOCAB, TextCorpus, stdlib_corpus
from infralens.training.train_single_gpu import TrainConfig, train

__all__ = ["run_plan", "train_on_text", "calibration_windows", "outlier_summary", "bf16_model",
           "format_rows", "main", "OUTLIER_FACTOR", "plot_outlier_ratios", "by_label", "matrix_table",
           "compare_rows", "ERROR_BLOCKS"]

PROG = "infralens.quant.compare"
#: Blocks of consecutive held-out windows the standard errors are taken over (neighbouring
#: windows come from the same file and are correlated).
ERROR_BLOCKS = 32
#: An input channel counts as an outlier when its largest magnitude exceeds this many times the
#: median channel's: a relative criterion of this lab's (LLM.int8()'s threshold is an absolute
#: magnitude, ``smoothing.LLM_INT8_THRESHOLD``).
OUTLIER_FACTOR = 6.0


def train_on_text(spec: ModelSpec, corpus: TextCorpus, device: str = "cpu", seed: int = 0):
    """Train the plan's GPT ``spec`` on the corpus's training bytes with Lab 02's loop (AdamW,
    constant learning rate; BF16 autocast on a GPU). Returns its :class:`TrainResult`."""
    model = GPTConfig(vocab_size=BYTE_VOCAB, n_positions=spec.seq_len, d_model=spec.d_model,
                      n_layers=spec.n_layers, n_heads=spec.n_heads)
    cfg = TrainConfig(model=model, batch=spec.batch, seq_len=spec.seq_len, steps=spec.steps,
                      lr=spec.lr, amp=device.startswith("cuda"), device=device, seed=seed,
                      corpus_tokens=len(corpus.train))
    return train(cfg, corpus=corpus.train)


def calibration_windows(tokens: torch.Tensor, n: int, seq_len: int) -> torch.Tensor:
    """``n`` training windows (n, seq_len), evenly spaced through the stream."""
    starts = torch.linspace(0, len(tokens) - seq_len - 1, n).long()
    return torch.stack([tokens[s: s + seq_len] for s in starts.tolist()])


def bf16_model(model: torch.nn.Module) -> torch.nn.Module:
    """A copy whose block linears compute with their weights rounded to BF16."""
    import copy

    out = copy.deepcopy(model).eval()
    mods = dict(out.named_modules())
    for name, linear in list(block_linears(out)):
        parent, attr = name.rsplit(".", 1)
        setattr(mods[parent], attr, QuantLinear(linear, linear.weight.bfloat16()))
    return out


# [quant:outliers]
def outlier_summary(absmax: dict[str, torch.Tensor]) -> list[dict]:
    """Per layer input: the largest channel's magnitude over the median channel's, and which
    channels exceed :data:`OUTLIER_FACTOR` times the median."""
    rows = []
    for name, a in absmax.items():
        median = float(a.median())
        rows.append({"layer": name, "channels": a.numel(), "max": float(a.max()), "median": median,
                     "ratio": float(a.max()) / median,
                     "outliers": [int(i) for i in torch.nonzero(a > OUTLIER_FACTOR * median).flatten()]})
    return rows
# [/quant:outliers]


# [quant:run]
def run_plan(plan: Plan, device: str = "cpu", models: Sequence[str] | None = None,
             log: Callable[[str], None] | None = None) -> dict:
    """Train every model the plan names (or those in ``models``) and fill its matrix."""
    corpus = stdlib_corpus(plan.train_bytes, plan.held_out_bytes)
    out = {"python": corpus.python, "files": corpus.files, "held_out_files": corpus.held_out_files,
           "train_bytes": plan.train_bytes, "held_out_bytes": plan.held_out_bytes,
           "group_size": plan.group_size, "models": []}
    for spec in plan.models:
        if models and spec.name not in models:
            continue
        t0 = time.perf_counter()
        trained = train_on_text(spec, corpus, device)
        model = trained.model.eval().float()
        calib = calibration_windows(corpus.train, plan.calibration_sequences, spec.seq_len)
        calib = calib.to(device)
        held = corpus.held_out
        ref = window_losses(model, held, spec.seq_len)
        rows = [{"method": "fp32", "format": "fp32", "granularity": "-", "losses": ref,
                 "weight_bytes": weight_bytes(model, None, plan.group_size, other_bits=32)},
                {"method": "bf16", "format": "bf16", "granularity": "-",
                 "losses": window_losses(bf16_model(model), held, spec.seq_len),
                 "weight_bytes": weight_bytes(model, None, plan.group_size)}]
        for cell in plan.cells():
            t = time.perf_counter()
            quantized = quantize_model(model, cell, plan.group_size, calib, plan.smoothquant_alpha)
            rows.append({"method": cell.method, "format": cell.format,
                         "granularity": cell.granularity,
                         "losses": window_losses(quantized, held, spec.seq_len),
                         "weight_bytes": weight_bytes(model, cell, plan.group_size),
                         "seconds": time.perf_counter() - t})
            if log:
                log(f"{spec.name}: {cell.label}: mean loss {float(rows[-1]['losses'].mean()):.4f}")
        for row in rows:
            losses = row.pop("losses")
            row["ppl"] = math.exp(float(losses.mean()))
            row["delta_pct"], row["delta_pct_se"] = paired_change(losses, ref, ERROR_BLOCKS)
            row["window_losses"] = [round(v, 6) for v in losses.tolist()]
        absmax = channel_absmax(model, calib)
        out["models"].append({
            "name": spec.name, "spec": vars(spec), "params": trained.num_params,
            "losses": trained.losses, "train_seconds": trained.seconds,
            "final_loss": sum(trained.losses[-(len(trained.losses) // 10 or 1):])
            / (len(trained.losses) // 10 or 1),
            "seconds": time.perf_counter() - t0, "rows": rows,
            "outliers": outlier_summary(absmax),
            "absmax": {name: [round(v, 5) for v in a.tolist()] for name, a in absmax.items()}})
    return out
# [/quant:run]


def format_rows(result: dict) -> list[str]:
    """The matrix as aligned text lines, one per cell, model by model."""
    lines = []
    for m in result["models"]:
        lines.append(f"model {m['name']}: {m['params']:,} parameters, training loss "
                     f"{m['final_loss']:.3f} nats (mean of the last tenth of the steps)")
        lines.append(f"  {'method':<12} {'format':<6} {'scales':<8} {'weights':>13} "
                     f"{'perplexity':>10} {'change':>8} {'± s.e.':>7}")
        for r in m["rows"]:
            lines.append(f"  {r['method']:<12} {r['format']:<6} {r['granularity']:<8} "
                         f"{r['weight_bytes'] / 1e3:>10,.1f} kB {r['ppl']:>10.4f} "
                         f"{r['delta_pct']:>+7.2f}% {r['delta_pct_se']:>6.2f}")
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog=PROG, description="Run a quantization comparison plan.")
    parser.add_argument("plan_file", nargs="?", help="a plan YAML file (default: --plan)")
    parser.add_argument("--plan", default="small", help="a shipped plan: small or full")
    parser.add_argument("--models", nargs="+", help="run only these models of the plan")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--out", type=output_path, help="write the results as JSON here")
    return parser


def _prepare(argv: Sequence[str] | None):
    args = build_parser().parse_args(argv)
    plan = load_plan(args.plan_file or shipped_plan(args.plan))
    names = [m.name for m in plan.models]
    for name in args.models or ():
        if name not in names:
            raise PlanError(f"the plan has no model {name!r}; it has: {', '.join(names)}")
    if args.device not in ("cpu", "cuda"):
        raise PlanError(f"--device must be cpu or cuda, got {args.device!r}")
    if args.device == "cuda" and not torch.cuda.is_available():
        raise PlanError("--device cuda asked for, but PyTorch sees no CUDA GPU")
    return args, plan


def _run(prepared) -> int:
    args, plan = prepared
    result = run_plan(plan, args.device, args.models)
    print("\n".join(format_rows(result)))
    if args.out:
        write_json(args.out, result)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return run_main(PROG, argv, _prepare, _run, errors=(UsageError, PlanError, ValueError))


if __name__ == "__main__":
    raise SystemExit(main())


def plot_outlier_ratios(result: dict):
    """One panel per kind of layer input: the largest channel over the median channel, layer by
    layer, one line per model."""
    import matplotlib.pyplot as plt

    kinds = ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")
    fig, axes = plt.subplots(2, 2, figsize=(7, 5), sharey=True)
    for ax, kind in zip(axes.flat, kinds, strict=True):
        for m in result["models"]:
            rows = [o for o in m["outliers"] if o["layer"].endswith(kind)]
            ax.plot(range(len(rows)), [o["ratio"] for o in rows], marker="o", label=m["name"])
        ax.axhline(OUTLIER_FACTOR, color="grey", linestyle=":")
        ax.set_title(f"input of {kind}", fontsize=10)
        ax.set_xlabel("layer")
    for ax in axes[:, 0]:
        ax.set_ylabel("largest / median channel")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    return fig


def by_label(model: dict) -> dict[str, dict]:
    """A model's rows keyed by ``"method format granularity"`` (``"fp32 fp32 -"`` for the reference)."""
    return {f"{r['method']} {r['format']} {r['granularity']}": r for r in model["rows"]}


def compare_rows(model: dict, label: str, other: str) -> tuple[float, float]:
    """The perplexity change of row ``label`` against row ``other`` of one model, in percent, with
    its standard error over :data:`ERROR_BLOCKS` blocks of held-out windows
    (:func:`~infralens.quant.apply.paired_change`)."""
    rows = by_label(model)
    return paired_change(torch.tensor(rows[label]["window_losses"]),
                         torch.tensor(rows[other]["window_losses"]), ERROR_BLOCKS)


def matrix_table(models: list[dict]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the matrix for a page table: per model, the weight bytes and the change of
    perplexity from the FP32 model with its standard error (:func:`paired_change`), cell by cell."""
    header = ["Method", "Format", "Scales"]
    for m in models:
        header += [f"{m['name']}: MB" if m["rows"][0]["weight_bytes"] > 1e7 else f"{m['name']}: kB",
                   f"{m['name']}: change ± s.e."]
    labels = list(by_label(models[0]))
    rows = []
    for label in labels:
        row = label.split(" ")
        for m in models:
            r = by_label(m)[label]
            scale = 1e6 if m["rows"][0]["weight_bytes"] > 1e7 else 1e3
            change, se = compare_rows(m, label, "fp32 fp32 -")
            row += [f"{r['weight_bytes'] / scale:,.1f}", f"{change:+.2f}% ± {se:.2f}"]
        rows.append(row)
    return header, rows
