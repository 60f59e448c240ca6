"""torchrun as a subprocess: the command line, the children's environment, and a run shown."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

import pytest

from infralens.training import launch


def test_command_is_torchrun_standalone():
    cmd = launch.torchrun_command("infralens.training.train_ddp", ["--steps", "2"], nproc=4)
    assert cmd == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                   "-m", "infralens.training.train_ddp", "--steps", "2"]


def test_children_import_this_checkout_with_one_thread_and_no_multicast(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    monkeypatch.setenv("OMP_NUM_THREADS", "16")  # the parent's value is overridden
    monkeypatch.setenv("KEEP_ME", "yes")
    env = launch.child_env()
    assert env["PYTHONPATH"].split(os.pathsep) == [str(launch.SRC), "/somewhere/else"]
    assert (launch.SRC / "infralens" / "training" / "launch.py").is_file()
    assert env["OMP_NUM_THREADS"] == "1" and env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["KEEP_ME"] == "yes"
    monkeypatch.delenv("PYTHONPATH")
    assert launch.child_env()["PYTHONPATH"] == str(launch.SRC)


RANK_REPORT = """\
import json, os
keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS")
out = os.path.join(os.environ["RANK_REPORT_DIR"], "rank" + os.environ["RANK"] + ".json")
with open(out, "w") as f:  # one file per rank: the ranks share one stdout
    json.dump({k: os.environ.get(k) for k in keys}, f)
"""


def test_torchrun_starts_one_process_per_rank_with_the_rendezvous_variables(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "rank_report.py").write_text(RANK_REPORT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("RANK_REPORT_DIR", str(tmp_path))  # children inherit the environment
    done = launch.torchrun("rank_report", nproc=2, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    ranks = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank*.json"))]
    ids = [(r["RANK"], r["LOCAL_RANK"], r["WORLD_SIZE"]) for r in ranks]
    assert ids == [("0", "0", "2"), ("1", "1", "2")]
    assert all(r["MASTER_ADDR"] and r["MASTER_PORT"] and r["OMP_NUM_THREADS"] == "1" for r in ranks)
    assert ranks[0]["MASTER_PORT"] == ranks[1]["MASTER_PORT"]


def completed(returncode: int, stdout: str, stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(launch.torchrun_command("pkg.mod", ["--n", "a b"], 2),
                                       returncode, stdout, stderr)


def test_show_prints_the_run_as_a_terminal_would(capsys):
    done = completed(0, "step 0\nstep 1\n")
    assert launch.show(done) is done
    assert capsys.readouterr().out.splitlines() == [
        "$ " + shlex.join(["torchrun", "--standalone", "--nproc-per-node=2", "-m", "pkg.mod", "--n", "a b"]),
        "step 0", "step 1", "[exit status 0]"]
    launch.show(completed(0, "no newline at the end"))
    assert capsys.readouterr().out.splitlines()[1:] == ["no newline at the end", "[exit status 0]"]


def test_a_failed_run_shows_its_stderr_and_raises(capsys):
    stderr = "\n".join(f"line {i}" for i in range(50))
    with pytest.raises(RuntimeError, match="pkg.mod --n 'a b': exit status 1"):
        launch.show(completed(1, "", stderr))
    out = capsys.readouterr().out.splitlines()
    assert out[-30:] == [f"line {i}" for i in range(20, 50)]  # the end of stderr, 30 lines
    assert "[exit status 1]" in out
    assert launch.show(completed(1, "", stderr), check=False).returncode == 1  # shown, not raised
