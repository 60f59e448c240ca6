"""Pipeline parallelism on 4 CPU ranks (GPipe and 1F1B) gives one process's gradients, and each
stage runs the forwards and backwards the schedule says."""

import json

import pytest
import torch

from infralens.parallel.pp_check import main
from infralens.training.launch import torchrun

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")


def test_pipelined_gradients_and_timelines(tmp_path):
    out = tmp_path / "pp.json"
    done = torchrun("infralens.parallel.pp_check", ["--out", str(out)], nproc=4, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    m = report["microbatches"]
    for r in report["ranks"]:
        for schedule in ("gpipe", "1f1b"):
            assert r[schedule]["grad_err"] < 1e-12
            kinds = [k for k, *_ in r[schedule]["events"]]
            assert kinds.count("F") == m and kinds.count("B") == m
    # GPipe runs every forward of a stage before its first backward; 1F1B on the first stage
    # starts backwards after p - 1 + 1 forwards
    first = [k for k, *_ in report["ranks"][0]["gpipe"]["events"]]
    assert first[:m] == ["F"] * m
    one = [k for k, *_ in report["ranks"][0]["1f1b"]["events"]]
    assert one[:report["world"]] == ["F"] * report["world"] and one[report["world"]] == "B"


def test_bad_flags_are_one_line(capsys, tmp_path):
    assert main(["--out", str(tmp_path / "x.json"), "--microbatches", "3", "--batch", "16"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
