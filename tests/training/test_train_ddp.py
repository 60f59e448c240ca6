"""Lab 03's training loop under torchrun with two CPU ranks (gloo): it logs once, saves once, keeps
no logits, and every distributed module refuses to run without torchrun in one line."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist

from infralens.models.gpt import GPT
from infralens.training import train_ddp
from infralens.training.launch import torchrun
from infralens.training.train_ddp import TORCHRUN_VARS, DDPConfig, DistContext
from infralens.training.train_single_gpu import PRESETS, TrainConfig

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")


def test_training_run_logs_once_saves_once(tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    done = torchrun("infralens.training.train_ddp",
                    ["--steps", "4", "--log-every", "2", "--save", str(ckpt)], nproc=2, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert sum(line.startswith("step ") for line in lines) == 3  # steps 0, 2, 3, from rank 0 only
    assert sum("saved" in line for line in lines) == 1
    saved = torch.load(ckpt)
    assert saved["step"] == 4 and not any(k.startswith("module.") for k in saved["model"])
    GPT(PRESETS["tiny"]).load_state_dict(saved["model"])  # a plain model loads what rank 0 saved


def test_without_torchrun_one_line_exit_2():
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARS}
    for module in ("infralens.training.train_ddp", "infralens.training.ddp_check",
                   "infralens.training.fsdp_shards", "infralens.training.ddp_overlap"):
        args = ["--out", "x"] if module.endswith("ddp_check") else []
        done = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True,
                              env=env)
        assert done.returncode == 2, (module, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "torchrun" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("argv", [["--accum", "0"], ["--batch", "0"], ["--device", "tpu"],
                                  ["--bucket-cap-mb", "-1"]])
def test_bad_input_one_line_exit_2(argv):
    done = subprocess.run([sys.executable, "-m", "infralens.training.train_ddp", *argv],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_the_ddp_loop_keeps_no_logits(monkeypatch):
    """One gloo rank in this process: every forward pass of train_ddp (each micro-batch's) starts
    with no tensor of B x T x V elements alive, so the last micro-batch's logits were dropped."""
    c = TrainConfig(model=PRESETS["tiny"], batch=4, seq_len=32, steps=2, corpus_tokens=4096)
    size, vocab = c.batch * c.seq_len * c.model.vocab_size, c.model.vocab_size
    forwards: list[int] = []

    def alive() -> list:
        gc.collect()
        return [tuple(o.shape) for o in gc.get_objects() if issubclass(type(o), torch.Tensor)
                and o.numel() == size and o.shape[-1] == vocab]

    class ProbeGPT(GPT):
        def forward(self, idx, targets=None):
            assert not alive(), f"forward {len(forwards)}: earlier logits still alive"
            forwards.append(1)
            return super().forward(idx, targets)

    monkeypatch.setattr(train_ddp, "GPT", ProbeGPT)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        ctx = DistContext(rank=0, world=1, local_rank=0, device=torch.device("cpu"), backend="gloo")
        train_ddp.train_ddp(DDPConfig(c, accum=2, log_every=1), ctx, log=lambda _: None)
    finally:
        dist.destroy_process_group()
    assert len(forwards) == c.steps * 2


def test_the_world_size_is_read_before_joining_the_group(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert train_ddp.launch_world() == 1  # outside torchrun: the batch must fit the whole corpus
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert train_ddp.launch_world() == 4
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("WORLD_SIZE", bad)
        with pytest.raises(train_ddp.LaunchError, match=f"WORLD_SIZE='{bad}'"):
            train_ddp.launch_world()


def test_rank_checks_come_before_init(monkeypatch, capsys):
    # Every torchrun variable set, but bad input: the rank stops before init_process_group.
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "0"),
                        ("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **k: pytest.fail("joined the group"))
    assert train_ddp.main(["--batch", "1000"]) == 2
    assert "each of 2 ranks reads 511" in capsys.readouterr().err
