"""Lab 02: a complete single-GPU training loop for the GPT of ``infralens.models.gpt``.

    python -m infralens.training.train_single_gpu                     # tiny model on the CPU
    python -m infralens.training.train_single_gpu --amp --checkpoint  # both switches on
    python -m infralens.training.train_single_gpu --preset gpt2-1b --device cuda --amp \\
        --batch 4 --seq-len 2048 --steps 20

One step is data -> forward -> loss -> backward -> optimizer step -> zero_grad. Two switches
change what the step keeps in memory, not what it computes:

* ``amp``: bf16 autocast around forward and loss. Weights, gradients and AdamW's moments stay
  fp32; matmuls run in bf16 and save bf16 activations.
* ``checkpoint``: every transformer block keeps only its input during forward and recomputes
  the rest during backward.

The model is Lab 01's ``GPT`` and the ledger that predicts its memory is Lab 01's
``infralens.memory``: :func:`ledger_by_phase` turns ``training_ledger`` and
``activation_bytes_per_layer`` into a prediction for every phase of every step, and
:class:`MemoryWatch` reads the real thing with Lab 01's probes (``infralens.memory.measure``):
the CUDA allocator on a GPU, the bytes of the tensors that exist (parameters, ``.grad``,
optimizer state, and what autograd saved for backward) anywhere else.

The data is a synthetic token stream from a Markov chain in which every token has
``branching`` successors, drawn with replacement and then picked uniformly, so a model that
learns it reaches a known floor (:func:`loss_floor`; at most ln(branching) nats, less where a
token's successors repeat) instead of a number nobody can check.

Bad input (a non-positive or 400-digit size, heads that do not divide the width, a sequence
longer than the model's positions, a batch the corpus has too few windows for, a learning rate
that is not a finite positive number, CUDA asked for where there is none) is found before the
model is built and prints one line,
``infralens.training.train_single_gpu: error: <reason>``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field

import torch
from torch.utils.data import DataLoader, Dataset

from infralens.memory import activation_bytes_per_layer, count_parameters, training_ledger
from infralens.memory.measure import (
    AllocatorProbe,
    TensorBytesProbe,
    _SavedTensorTracker,
    saved_tensors_by_module,
    tensor_breakdown,
)
from infralens.models.gpt import GPT, GPTConfig
from infralens.tools.checks import require_positive
from infralens.tools.cli import (
    MAX_INT,
    OneLineParser,
    non_negative_int,
    positive_float,
    positive_int,
    run_main,
)

PROG = "infralens.training.train_single_gpu"

PRESETS: dict[str, GPTConfig] = {
    "tiny": GPTConfig(vocab_size=256, n_positions=128, d_model=64, n_layers=2, n_heads=4),
    "gpt2-small": GPTConfig.gpt2_small(),
    "gpt2-1b": GPTConfig.gpt2_1b(),
}


# [train:data]
def markov_corpus(n_tokens: int, vocab_size: int, branching: int = 4, seed: int = 0) -> torch.Tensor:
    """A token stream in which each token has ``branching`` equally likely successors."""
    require_positive(n_tokens=n_tokens, vocab_size=vocab_size, branching=branching)
    rng = random.Random(seed)
    successors = [[rng.randrange(vocab_size) for _ in range(branching)] for _ in range(vocab_size)]
    tokens = [rng.randrange(vocab_size)]
    for _ in range(n_tokens - 1):
        tokens.append(rng.choice(successors[tokens[-1]]))
    return torch.tensor(tokens, dtype=torch.long)  # (N,)


class TokenWindows(Dataset):
    """Non-overlapping windows of a token stream: sample i is (input, target), each (T,)."""

    def __init__(self, corpus: torch.Tensor, seq_len: int) -> None:
        require_positive(seq_len=seq_len)
        if len(corpus) < seq_len + 1:
            raise ValueError(f"a corpus of {len(corpus)} tokens has no window of {seq_len} + 1")
        self.corpus, self.seq_len = corpus, seq_len

    def __len__(self) -> int:
        return (len(self.corpus) - 1) // self.seq_len

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i * self.seq_len
        window = self.corpus[start : start + self.seq_len + 1]  # (T + 1,)
        return window[:-1], window[1:]  # the target is the input shifted left by one token
# [/train:data]


def batches(dataset: Dataset, batch: int, seed: int = 0) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(x, y) batches of shape (B, T) forever, reshuffled every epoch, the last partial one dropped."""
    gen = torch.Generator().manual_seed(seed)
    loader = DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True, generator=gen)
    if len(loader) == 0:
        raise ValueError(f"a batch of {batch} needs more than the dataset's {len(dataset)} windows")
    while True:
        yield from loader


def successor_table(vocab_size: int, branching: int = 4, seed: int = 0) -> list[list[int]]:
    """Each token's successors as ``markov_corpus`` draws them (its generator's first draws, replayed)."""
    require_positive(vocab_size=vocab_size, branching=branching)
    rng = random.Random(seed)
    return [[rng.randrange(vocab_size) for _ in range(branching)] for _ in range(vocab_size)]


def loss_floor(corpus: torch.Tensor, vocab_size: int, branching: int = 4, seed: int = 0) -> float:
    """Mean cross-entropy (nats) on ``corpus`` of the model that knows the successor table.

    No model can do better on average. The successors are drawn with replacement, so a token
    whose successor appears twice in its list is more predictable than one with ``branching``
    distinct ones: the floor is at most ln(branching), and equal to it only when nothing repeats.
    """
    probs = [{t: row.count(t) / branching for t in row}
             for row in successor_table(vocab_size, branching, seed)]
    tokens = corpus.tolist()
    if len(tokens) < 2:
        raise ValueError("a corpus needs at least two tokens to have a transition")
    nats = 0.0
    for a, b in zip(tokens[:-1], tokens[1:], strict=True):
        if b not in probs[a]:
            raise ValueError(f"token {b} never follows {a} in this table: another seed or size?")
        nats -= math.log(probs[a][b])
    return nats / (len(tokens) - 1)


@dataclass(frozen=True)
class TrainConfig:
    """Everything one run needs; the defaults train the tiny preset on the CPU in seconds."""

    model: GPTConfig = field(default_factory=lambda: PRESETS["tiny"])
    batch: int = 8
    seq_len: int = 64
    steps: int = 40
    lr: float = 1e-2
    weight_decay: float = 0.1
    amp: bool = False  # bf16 autocast around forward + loss
    checkpoint: bool = False  # recompute every block's activations in backward
    device: str = "cpu"
    seed: int = 0
    corpus_tokens: int = 1 << 16
    branching: int = 4  # successors per token in the synthetic corpus: loss floor <= ln(branching)

    def __post_init__(self) -> None:
        require_positive(batch=self.batch, seq_len=self.seq_len, steps=self.steps,
                         corpus_tokens=self.corpus_tokens, branching=self.branching)
        if self.seq_len > self.model.n_positions:
            raise ValueError(f"seq_len {self.seq_len} is longer than the model's "
                             f"{self.model.n_positions} positions")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise ValueError(f"lr must be a finite positive number, got {self.lr}")
        if not (math.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be a finite number >= 0, got {self.weight_decay}")
        if not 0 <= self.seed <= MAX_INT:
            raise ValueError(f"seed must be an integer from 0 to 2**63 - 1, got {self.seed}")

    @property
    def windows(self) -> int:
        """Samples of the corpus: windows of ``seq_len`` tokens and their targets (:class:`TokenWindows`)."""
        return (self.corpus_tokens - 1) // self.seq_len

    def check_data(self, world: int = 1) -> None:
        """Raise ``ValueError`` unless every one of ``world`` ranks, reading its 1/world of the
        windows, gets a whole batch: checked before a model is built, not at the first step."""
        per_rank = self.windows // world
        if per_rank < self.batch:
            ranks = f", and each of {world} ranks reads {per_rank:,} of them" if world > 1 else ""
            raise ValueError(f"a batch of {self.batch:,} sequences of {self.seq_len:,} tokens: the "
                             f"corpus of {self.corpus_tokens:,} tokens has {self.windows:,} such "
                             f"windows{ranks} (use a smaller batch or sequence)")

    @property
    def precision(self) -> str:
        """The ledger's name for this recipe: ``amp`` (autocast) or ``fp32``."""
        return "amp" if self.amp else "fp32"


class NoWatch:
    """The loop's default observer: every phase runs bare."""

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        pass

    def __call__(self, phase: str, step: int):
        return nullcontext()


# [train:watch]
class MemoryWatch:
    """Reads memory after every phase of every step with Lab 01's probes (``memory/measure.py``).

    On a GPU: ``torch.cuda.memory_allocated`` after the phase and the peak within it. Elsewhere:
    the bytes of the tensors that exist, from parameters, ``.grad``, optimizer state and the
    storages autograd saved for backward (seen through ``saved_tensors_hooks``).
    Create it before the model, so the allocator's baseline excludes nothing of the run.
    """

    def __init__(self, device: str | torch.device, breakdown: Callable = tensor_breakdown) -> None:
        self.device = torch.device(device)
        self.breakdown = breakdown  # (model, optimizer, saved, device) -> bytes per category
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        cuda = self.device.type == "cuda"
        self.probe = AllocatorProbe(self.device) if cuda else TensorBytesProbe()
        self.saved = _SavedTensorTracker()  # storages autograd keeps for backward
        self.readings: list[dict] = []
        self.model: torch.nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.probe.start()  # the "model" reading's peak covers building the model, nothing before

    def attach(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> None:
        self.model, self.optimizer = model, optimizer
        self.readings.append({"step": None, "phase": "model", "seconds": 0.0, **self._read()})

    @contextmanager
    def __call__(self, phase: str, step: int):
        self.probe.start()  # on a GPU: synchronize, reset the peak
        start = time.perf_counter()
        with self.saved.hooks() if phase == "forward" else nullcontext():
            yield
        if phase == "backward":
            self.saved.storages.clear()  # the graph, and all it saved, is gone
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - start
        self.readings.append({"step": step, "phase": phase, "seconds": seconds, **self._read()})

    def _read(self) -> dict:
        return self.probe.read(self.breakdown(self.model, self.optimizer, self.saved.storages,
                                              self.device))
# [/train:watch]


@dataclass
class TrainResult:
    """What :func:`train` returns: the trained model and optimizer, and how the run went."""

    model: GPT
    optimizer: torch.optim.Optimizer
    losses: list[float]  # one per step
    num_params: int
    seconds: float  # wall clock of the steps, up to the GPU's last kernel (synchronized)
    tokens: int  # steps x batch x seq_len

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds


def train(
    cfg: TrainConfig,
    *,
    watch: NoWatch | MemoryWatch | None = None,
    log: Callable[[str], None] | None = None,
    log_every: int = 10,
    wrap: Callable[[GPT], torch.nn.Module] | None = None,
    data_seed: int | None = None,
    corpus: torch.Tensor | None = None,
) -> TrainResult:
    """Train ``cfg.steps`` AdamW steps; ``watch`` sees every phase, ``log`` gets progress lines.

    ``wrap`` (Lab 08) turns the model into what the loop trains (a DDP module, or the same module
    sharded in place by FSDP) before the optimizer is made; ``data_seed`` (default ``cfg.seed``)
    picks the batches, so ranks can read different ones from the same initial weights. ``corpus``
    replaces the Markov stream with real tokens (ids below the model's vocabulary; Lab 11 trains on
    text); its length must be ``cfg.corpus_tokens``.
    """
    device = torch.device(cfg.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device cuda asked for, but PyTorch sees no CUDA GPU")
    cfg.check_data()  # a batch the corpus cannot fill fails here, not after the model is built
    if corpus is not None and (len(corpus) != cfg.corpus_tokens
                               or int(corpus.max()) >= cfg.model.vocab_size):
        raise ValueError(f"corpus: {len(corpus):,} tokens up to id {int(corpus.max())}; the config "
                         f"says {cfg.corpus_tokens:,} tokens below {cfg.model.vocab_size}")
    watch = watch or NoWatch()
    seed = cfg.seed if data_seed is None else data_seed
    if corpus is None:
        corpus = markov_corpus(cfg.corpus_tokens, cfg.model.vocab_size, cfg.branching, cfg.seed)
    data = batches(TokenWindows(corpus, cfg.seq_len), cfg.batch, seed)
    torch.manual_seed(cfg.seed)
    # [train:setup]
    with device:  # build and initialize the weights directly on the device
        gpt = GPT(cfg.model, checkpoint=cfg.checkpoint)  # fp32 weights: 4 bytes x Ψ
    gpt.train()
    model = wrap(gpt) if wrap else gpt  # Lab 08: DDP or FSDP around the same model
    optimizer = torch.optim.AdamW(  # its state (exp_avg, exp_avg_sq) appears at the first step
        model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, foreach=False, fused=False
    )
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=cfg.amp)
    # [/train:setup]
    watch.attach(model, optimizer)
    losses: list[torch.Tensor] = []
    start = time.perf_counter()
    # [train:loop]
    for step in range(cfg.steps):
        x, y = next(data)  # (B, T) token ids and (B, T) next-token targets, on the CPU
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with watch("forward", step), autocast:
            loss = model(x, y)[1]  # mean cross-entropy (); the (B, T, V) logits are dropped here
        with watch("backward", step):
            loss.backward()  # saved activations freed layer by layer; p.grad: 4 bytes x Ψ
        with watch("step", step):
            optimizer.step()  # AdamW: exp_avg and exp_avg_sq, 8 bytes x Ψ, made at step 0
        with watch("zero_grad", step):
            optimizer.zero_grad(set_to_none=True)  # the gradients are released, not zeroed
        losses.append(loss.detach())
        if log and (step % log_every == 0 or step == cfg.steps - 1):
            log(f"step {step:4d}  loss {loss.item():.4f}")  # .item() waits for the GPU
    # [/train:loop]
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    return TrainResult(gpt, optimizer, torch.stack(losses).float().tolist(), gpt.num_params(),
                       seconds, cfg.steps * cfg.batch * cfg.seq_len)


def num_params(model_cfg: GPTConfig) -> int:
    """Ψ by Lab 01's exact count of the same architecture as a Hugging Face config."""
    return count_parameters(model_cfg.to_hf_config()).total


# [train:ledger]
def ledger_by_phase(cfg: TrainConfig, steps: int = 2) -> list[dict]:
    """What the ledger predicts is allocated after each phase of the first ``steps`` steps.

    State lines come from ``training_ledger`` (AdamW; ``amp`` or ``fp32``); the forward pass adds
    L layers of Korthikanti activations, selective (SDPA stores no scores) or full (checkpointed),
    doubled where this GPT keeps fp32: everything in fp32, and a checkpointed block's input (the
    fp32 residual stream) under autocast too, since the formula counts 2-byte activations.
    """
    psi = num_params(cfg.model)
    led = training_ledger(psi, "adamw", cfg.precision)
    m = cfg.model
    per_layer = activation_bytes_per_layer(s=cfg.seq_len, b=cfg.batch, h=m.d_model, a=m.n_heads,
                                           recompute="full" if cfg.checkpoint else "selective")
    activations = m.n_layers * per_layer * (1 if cfg.amp and not cfg.checkpoint else 2)
    rows = [{"step": None, "phase": "model", "params": led.weights, "grads": 0,
             "optimizer_state": 0, "activations": 0}]
    for step in range(steps):
        moments = 0 if step == 0 else led.optimizer_states  # AdamW makes them at the first step
        for phase, grads, state, act in (
            ("forward", 0, moments, activations),  # activations saved for backward
            ("backward", led.gradients, moments, 0),  # activations freed, gradients made
            ("step", led.gradients, led.optimizer_states, 0),  # the moments exist from here on
            ("zero_grad", 0, led.optimizer_states, 0),  # set_to_none releases the gradients
        ):
            rows.append({"step": step, "phase": phase, "params": led.weights, "grads": grads,
                         "optimizer_state": state, "activations": act})
    for row in rows:
        row["total"] = row["params"] + row["grads"] + row["optimizer_state"] + row["activations"]
    return rows
# [/train:ledger]


def saved_by_module(model: GPT, x: torch.Tensor, y: torch.Tensor, amp: bool = False) -> list[dict]:
    """One forward pass of the GPT with its loss (under bf16 autocast if ``amp``): which module
    saved which tensor for backward, storage by storage, every byte once
    (:func:`infralens.memory.measure.saved_tensors_by_module`). Leaves no gradient behind."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        rows = saved_tensors_by_module(model, x, y)
    model.zero_grad(set_to_none=True)
    return rows


# --- command line --------------------------------------------------------------------------------



def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog=f"python -m {PROG}", description=__doc__.splitlines()[0],
                       epilog=f"Bad input prints one line, '{PROG}: error: <reason>', and exits 2.")
    p.add_argument("--preset", choices=tuple(PRESETS), default="tiny", help="model size (default tiny)")
    for flag, help_ in (("--vocab", "vocabulary size"), ("--d-model", "width"),
                        ("--layers", "transformer blocks"), ("--heads", "attention heads")):
        p.add_argument(flag, type=positive_int, help=f"override the preset's {help_}")
    p.add_argument("--batch", type=positive_int, default=8, help="sequences per step (default 8)")
    p.add_argument("--seq-len", type=positive_int, default=64, help="tokens per sequence (default 64)")
    p.add_argument("--steps", type=positive_int, default=40, help="optimizer steps (default 40)")
    p.add_argument("--lr", type=positive_float, default=1e-2, help="AdamW learning rate (default 1e-2)")
    p.add_argument("--amp", action="store_true", help="bf16 autocast around forward + loss")
    p.add_argument("--checkpoint", action="store_true", help="recompute each block in backward")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--seed", type=non_negative_int, default=0, help="seed of the weights and the data")
    p.add_argument("--log-every", type=positive_int, default=10, help="print every N steps")
    return p


def config_from_args(args: argparse.Namespace) -> TrainConfig:
    base = PRESETS[args.preset]
    overrides = {"vocab_size": args.vocab, "d_model": args.d_model, "n_layers": args.layers,
                 "n_heads": args.heads}
    model = GPTConfig(**{**base.to_dict(), **{k: v for k, v in overrides.items() if v is not None}})
    if args.device not in ("cpu", "cuda") and not args.device.startswith("cuda:"):
        raise ValueError(f"device must be cpu or cuda, got {args.device!r}")
    return TrainConfig(model=model, batch=args.batch, seq_len=args.seq_len, steps=args.steps,
                       lr=args.lr, amp=args.amp, checkpoint=args.checkpoint, device=args.device,
                       seed=args.seed)


def _prepare(argv: Sequence[str] | None) -> tuple[argparse.Namespace, TrainConfig]:
    args = build_parser().parse_args(argv)
    cfg = config_from_args(args)
    cfg.check_data()
    if cfg.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device cuda asked for, but PyTorch sees no CUDA GPU")
    return args, cfg


def _run(prepared: tuple[argparse.Namespace, TrainConfig]) -> None:
    args, cfg = prepared
    m = cfg.model
    print(f"GPT: {num_params(m):,} parameters (d_model {m.d_model}, {m.n_layers} layers, "
          f"{m.n_heads} heads, vocab {m.vocab_size}); batch {cfg.batch} x {cfg.seq_len} tokens; "
          f"amp {cfg.amp}, checkpoint {cfg.checkpoint}, {cfg.device}")
    floor = loss_floor(markov_corpus(cfg.corpus_tokens, m.vocab_size, cfg.branching, cfg.seed),
                       m.vocab_size, cfg.branching, cfg.seed)
    print(f"loss floor of the corpus: {floor:.4f} nats (at most ln({cfg.branching}) = "
          f"{math.log(cfg.branching):.4f})")
    result = train(cfg, log=print, log_every=args.log_every)
    print(f"{result.tokens:,} tokens in {result.seconds:.2f} s ({result.tokens_per_s:,.0f} tokens/s)")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0, or 2 for bad input)."""
    return run_main(PROG, argv, _prepare, _run)


if __name__ == "__main__":
    sys.exit(main())
