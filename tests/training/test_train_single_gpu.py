"""Lab 02's loop: it learns, its switches change memory and not results, and the ledger predicts
every model-state byte the loop creates (read from tensors on the CPU, through Lab 01's probes)."""

from __future__ import annotations

import gc
import math
import re
import subprocess
import sys
from contextlib import contextmanager

import pytest
import torch

from infralens.memory import activation_bytes_per_layer, training_ledger
from infralens.memory.measure import layer_saved_bytes
from infralens.models.gpt import GPT, GPTConfig
from infralens.training.train_single_gpu import (
    MemoryWatch,
    NoWatch,
    TokenWindows,
    TrainConfig,
    ledger_by_phase,
    loss_floor,
    main,
    markov_corpus,
    num_params,
    saved_by_module,
    successor_table,
    train,
)

TINY = GPTConfig(vocab_size=64, n_positions=32, d_model=32, n_layers=2, n_heads=4)


def cfg(**kw) -> TrainConfig:
    base = {"model": TINY, "batch": 4, "seq_len": 32, "steps": 3, "corpus_tokens": 4096}
    return TrainConfig(**{**base, **kw})


def test_corpus_and_windows():
    c = markov_corpus(5000, 50, branching=3, seed=1)
    assert torch.equal(c, markov_corpus(5000, 50, branching=3, seed=1))
    successors: dict[int, set[int]] = {}
    for a, b in zip(c[:-1].tolist(), c[1:].tolist(), strict=True):
        successors.setdefault(a, set()).add(b)
    assert max(len(s) for s in successors.values()) <= 3
    data = TokenWindows(c, 16)
    x, y = data[2]
    assert len(data) == (5000 - 1) // 16 and torch.equal(x[1:], y[:-1]) and torch.equal(x, c[32:48])
    with pytest.raises(ValueError):
        TokenWindows(c[:10], 16)


def test_the_floor_is_at_most_ln_branching():
    c = markov_corpus(5000, 50, branching=3, seed=1)
    table = successor_table(50, branching=3, seed=1)
    assert all(b in table[a] for a, b in zip(c[:-1].tolist(), c[1:].tolist(), strict=True))
    repeats = sum(len(set(row)) < 3 for row in table)
    floor = loss_floor(c, 50, branching=3, seed=1)
    assert repeats > 0 and floor < math.log(3)  # drawn with replacement: some successors repeat
    assert loss_floor(torch.tensor([0, 0]), 1, branching=2, seed=0) == 0.0  # one token, one successor
    never = next(t for t in range(50) if t not in table[0])
    with pytest.raises(ValueError):
        loss_floor(torch.tensor([0, never]), 50, branching=3, seed=1)  # a transition the table lacks


def test_learns_toward_the_floor():
    result = train(cfg(steps=60, model=GPTConfig(vocab_size=32, n_positions=32, d_model=32,
                                                 n_layers=1, n_heads=4)))
    first, last = result.losses[0], sum(result.losses[-5:]) / 5
    assert first == pytest.approx(math.log(32), abs=0.15)  # uniform guess at the start
    floor = loss_floor(markov_corpus(4096, 32), 32)
    assert floor <= math.log(4)
    assert last < first - 1.0 and last > floor - 0.05  # falling, never far below the floor


def test_switches_change_memory_not_results():
    plain = train(cfg())
    ckpt = train(cfg(checkpoint=True))
    assert plain.losses == pytest.approx(ckpt.losses, rel=1e-6)  # recomputation is exact here
    amp = train(cfg(amp=True))
    assert amp.losses == pytest.approx(plain.losses, abs=0.05)  # bf16 rounding, same trajectory
    for p in amp.model.parameters():
        assert p.dtype == torch.float32  # autocast never changes the stored weights


def test_num_params_is_lab01s_count():
    model = GPT(TINY)
    assert num_params(TINY) == model.num_params()


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("checkpoint", [False, True])
def test_watch_matches_the_ledger_on_the_cpu(amp, checkpoint):
    c = cfg(steps=2, amp=amp, checkpoint=checkpoint)
    watch = MemoryWatch("cpu")
    result = train(c, watch=watch)
    predicted = ledger_by_phase(c, steps=2)
    assert [(r["step"], r["phase"]) for r in watch.readings] == [(r["step"], r["phase"]) for r in predicted]
    n_tensors = len(list(result.model.parameters()))
    for got, want in zip(watch.readings, predicted, strict=True):
        b = got["breakdown"]
        assert b["params"] == want["params"]
        assert b["grads"] == want["grads"]
        # AdamW keeps a 0-dim fp32 `step` per tensor (on the CPU): 4 bytes each, not in the ledger.
        extra = 4 * n_tensors if want["optimizer_state"] else 0
        assert b["optimizer_state"] == want["optimizer_state"] + extra
        assert (b["activations"] > 0) == (got["phase"] == "forward")


@pytest.mark.parametrize("amp", [False, True])
def test_one_block_saves_what_the_account_says(amp):
    """The slope of saved bytes in the number of blocks is layer_saved_bytes, to the byte: per
    layer 16 values per token and channel, 64 bytes in fp32 and 36 under autocast (14 bf16
    values and two fp32 LayerNorm inputs), plus statistics and, under autocast, weight copies."""
    b, s = 2, 32

    def forward_bytes(n_layers: int) -> int:
        model = GPTConfig(**{**TINY.to_dict(), "n_layers": n_layers})
        c = cfg(steps=1, amp=amp, batch=b, seq_len=s, model=model)
        watch = MemoryWatch("cpu")
        train(c, watch=watch)
        return next(r for r in watch.readings if r["phase"] == "forward")["breakdown"]["activations"]

    account = layer_saved_bytes(TINY, b, s, amp)
    assert forward_bytes(3) - forward_bytes(2) == account["total"]
    sbh = b * s * TINY.d_model
    assert account["activations"] == (36 if amp else 64) * sbh
    # Korthikanti's 16-bit layer: 34 sbh = 16 values x 2 bytes + two 1-byte dropout masks.
    assert activation_bytes_per_layer(s, b, TINY.d_model, TINY.n_heads, recompute="selective") == 34 * sbh


def test_saved_by_module_charges_every_byte_once():
    b, s = 2, 32
    torch.manual_seed(0)
    model = GPT(TINY)
    x, y = torch.randint(0, 64, (b, s)), torch.randint(0, 64, (b, s))
    rows = saved_by_module(model, x, y, amp=True)
    block0 = sum(r["bytes"] for r in rows if r["module"].startswith("blocks.0."))
    assert block0 == layer_saved_bytes(TINY, b, s, amp=True)["total"]
    assert {r["module"] for r in rows} >= {"blocks.0.ln1", "blocks.0.attn", "blocks.0.mlp.act", "lm_head"}
    assert all(p.grad is None for p in model.parameters())


class LogitsProbe(NoWatch):
    """After each backward, and before each forward, no tensor of B x T x V elements may exist:
    the loop must not keep the logits (or anything of their size) alive across phases."""

    def __init__(self, c: TrainConfig) -> None:
        self.size, self.vocab = c.batch * c.seq_len * c.model.vocab_size, c.model.vocab_size
        self.checked: list[tuple[int, str]] = []

    def alive(self) -> list[tuple[int, ...]]:
        gc.collect()
        return [tuple(o.shape) for o in gc.get_objects()
                if issubclass(type(o), torch.Tensor) and o.numel() == self.size
                and o.shape[-1] == self.vocab]

    @contextmanager
    def __call__(self, phase: str, step: int):
        if phase == "forward":
            assert not self.alive(), f"step {step}: logits of the last step still alive"
        yield
        if phase == "backward":
            assert not self.alive(), f"step {step}: a B x T x V tensor survived backward"
        self.checked.append((step, phase))


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("checkpoint", [False, True])
def test_no_logits_survive_backward(amp, checkpoint):
    c = cfg(steps=2, amp=amp, checkpoint=checkpoint)
    probe = LogitsProbe(c)
    train(c, watch=probe)
    assert (1, "backward") in probe.checked
    # the probe sees a tensor that is alive: the logits, while the caller holds them
    model = GPT(TINY)
    x = torch.zeros(c.batch, c.seq_len, dtype=torch.long)
    logits, _ = model(x, x)
    assert probe.alive() == [(c.batch, c.seq_len, TINY.vocab_size)]
    del logits


def test_ledger_by_phase_lines():
    c = cfg(amp=True)
    rows = {(r["step"], r["phase"]): r for r in ledger_by_phase(c)}
    led = training_ledger(num_params(TINY), "adamw", "amp")
    assert rows[(0, "forward")]["optimizer_state"] == 0
    assert rows[(1, "forward")]["optimizer_state"] == led.optimizer_states
    assert rows[(1, "backward")]["total"] == led.total
    assert rows[(0, "zero_grad")]["total"] == led.weights + led.optimizer_states
    sbh = c.batch * c.seq_len * TINY.d_model
    assert rows[(0, "forward")]["activations"] == TINY.n_layers * 34 * sbh  # Korthikanti, 2-byte
    for amp in (False, True):  # a checkpointed block keeps its fp32 input: 4 sbh, also under amp
        ckpt = {(r["step"], r["phase"]): r for r in ledger_by_phase(cfg(amp=amp, checkpoint=True))}
        assert ckpt[(0, "forward")]["activations"] == TINY.n_layers * 4 * sbh


@pytest.mark.parametrize("amp", [False, True])
def test_checkpointed_block_saves_what_the_ledger_says(amp):
    """With checkpointing, one more block adds exactly the ledger's per-layer prediction to what
    the forward pass saves: the block's fp32 input, 4 bytes per token and channel."""
    def forward_bytes(n_layers: int) -> tuple[int, int]:
        c = cfg(steps=1, amp=amp, checkpoint=True,
                model=GPTConfig(**{**TINY.to_dict(), "n_layers": n_layers}))
        watch = MemoryWatch("cpu")
        train(c, watch=watch)
        got = next(r for r in watch.readings if r["phase"] == "forward")["breakdown"]["activations"]
        return got, next(r for r in ledger_by_phase(c) if r["phase"] == "forward")["activations"]

    (got2, led2), (got3, led3) = forward_bytes(2), forward_bytes(3)
    assert got3 - got2 == led3 - led2 == 4 * 4 * 32 * TINY.d_model


@pytest.mark.parametrize("argv, words", [
    (["--heads", "5"], "divisible"),
    (["--seq-len", "1000"], "positions"),
    (["--batch", "0"], "positive"),
    (["--batch", "-3"], "positive"),
    (["--device", "tpu"], "device"),
    (["--preset", "huge"], "invalid choice"),
])
def test_bad_input_one_line_exit_2(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err
    assert err.startswith("infralens.training.train_single_gpu: error: ")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_no_cuda_one_line_exit_2():
    done = subprocess.run([sys.executable, "-m", "infralens.training.train_single_gpu", "--device", "cuda"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1 and "CUDA" in done.stderr


def test_a_batch_the_corpus_cannot_fill_fails_before_the_model_is_built(monkeypatch):
    c = cfg(batch=200, seq_len=32, corpus_tokens=4096)  # 4095 // 32 = 127 windows
    assert c.windows == 127 == len(TokenWindows(markov_corpus(4096, 64), 32))
    with pytest.raises(ValueError, match="a batch of 200 sequences of 32 tokens: the corpus of 4,096 "
                                         "tokens has 127 such windows"):
        c.check_data()
    with pytest.raises(ValueError, match="each of 2 ranks reads 63 of them"):
        cfg(batch=64, corpus_tokens=4096).check_data(world=2)
    cfg(batch=63, corpus_tokens=4096).check_data(world=2)

    import infralens.training.train_single_gpu as tsg

    def no_model(*args, **kwargs):
        raise AssertionError("a model was built")

    monkeypatch.setattr(tsg, "GPT", no_model)
    with pytest.raises(ValueError, match="127 such windows"):
        train(c)


@pytest.mark.parametrize("changes, words", [
    ({"lr": math.inf}, "lr must be a finite positive number"),
    ({"lr": math.nan}, "lr must be a finite positive number"),
    ({"lr": -1e-3}, "lr must be a finite positive number"),
    ({"weight_decay": math.inf}, "weight_decay"),
    ({"seed": -1}, "seed must be an integer from 0 to 2**63 - 1"),
    ({"seed": 2**63}, "seed must be an integer from 0 to 2**63 - 1"),
])
def test_config_refuses_what_would_run_to_nan_or_overflow(changes, words):
    with pytest.raises(ValueError, match=re.escape(words)):
        cfg(**changes)


@pytest.mark.parametrize("argv, words", [
    (["--batch", "1024"], "has 1,023 such windows"),
    (["--lr", "inf"], "finite positive number"),
    (["--seed", str(10**33)], "at most 2**63 - 1"),
])
def test_the_command_line_checks_before_training(argv, words, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and words in err
