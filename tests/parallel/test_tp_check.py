"""Tensor parallelism on 2 and 4 CPU ranks equals one process, and sends what the formula says."""

import json

import pytest
import torch

from infralens.parallel import collective_bytes
from infralens.parallel.tp_check import main
from infralens.training.launch import torchrun

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")


@pytest.mark.parametrize("world", [2, 4])
def test_split_block_equals_the_block(tmp_path, world):
    out = tmp_path / "tp.json"
    done = torchrun("infralens.parallel.tp_check", ["--out", str(out)], nproc=world, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    size = report["batch"] * report["seq"] * report["hidden"] * 8  # float64 activations
    for r in report["ranks"]:
        assert r["out_err"] < 1e-12 and r["grad_err"] < 1e-12 and r["input_grad_err"] < 1e-12
        assert r["calls"] == {"forward": 2, "backward": 2}  # f and g, twice per block
        assert r["tensor_bytes"] == [size]
        assert r["sent_per_rank"] == 4 * collective_bytes("all_reduce", world, size)


def test_outside_torchrun_is_one_line(capsys, monkeypatch, tmp_path):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    assert main(["--out", str(tmp_path / "x.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["--out", str(tmp_path / "x.json"), "--hidden", "30", "--heads", "4"]) == 2
