"""The provenance of a GPU number: the printed line, the commit of a checkout, the device fields."""

from __future__ import annotations

import re
import shutil
import subprocess
from types import SimpleNamespace

import pytest

from infralens.tools.cells import provenance

PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef0123", "dirty": False}


def test_line_from_a_dict():
    assert provenance.line(PROV) == (
        "NVIDIA H100 80GB HBM3 · 132 SMs · driver 580.159.04 · CUDA 13.0 · torch 2.11.0+cu130 · "
        "triton 3.6.0 · 2026-11-21 07:00:00Z · commit 0123456789")


def test_line_marks_uncommitted_changes_and_an_unknown_commit():
    assert provenance.line(dict(PROV, dirty=True)).endswith("commit 0123456789 (uncommitted changes)")
    no_commit = {k: v for k, v in PROV.items() if k not in ("commit", "dirty")}
    assert provenance.line(no_commit).endswith(" · commit unknown")


def test_line_needs_the_device_fields():
    with pytest.raises(KeyError):
        provenance.line({k: v for k, v in PROV.items() if k != "gpu"})


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


@needs_git
def test_git_commit_of_a_checkout(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    git(repo, "add", "a.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
    head = git(repo, "rev-parse", "HEAD")
    assert provenance.git_commit(repo) == (head, False)
    (repo / "untracked.txt").write_text("new\n")
    assert provenance.git_commit(repo) == (head, False)  # untracked files do not count
    (repo / "a.txt").write_text("two\n")
    assert provenance.git_commit(repo) == (head, True)


def test_git_commit_without_git_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "_run", lambda cmd, cwd=None: None)  # no .git (the GPU machine)
    monkeypatch.setenv("INFRALENS_COMMIT", "abc123+dirty")
    assert provenance.git_commit(tmp_path) == ("abc123", True)
    monkeypatch.setenv("INFRALENS_COMMIT", "abc123")
    assert provenance.git_commit(tmp_path) == ("abc123", False)
    monkeypatch.delenv("INFRALENS_COMMIT")
    assert provenance.git_commit(tmp_path) == ("unknown", False)


def test_run_is_none_for_a_missing_tool_or_a_failure(tmp_path):
    assert provenance._run(["no-such-tool-anywhere", "--version"]) is None
    assert provenance._run(["git", "rev-parse", "HEAD"], cwd=tmp_path) is None  # not a checkout


def test_collect_reads_the_device(monkeypatch, tmp_path):
    torch = pytest.importorskip("torch")
    props = SimpleNamespace(name="NVIDIA H100 80GB HBM3", multi_processor_count=132,
                            total_memory=85_045_510_144, major=9, minor=0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: props)
    monkeypatch.setattr(provenance, "git_commit", lambda root: ("f" * 40, False))
    p = provenance.collect(tmp_path)
    assert (p["gpu"], p["sm_count"], p["memory_bytes"], p["compute_capability"]) == (
        props.name, 132, 85_045_510_144, "9.0")
    assert p["torch"] == torch.__version__ and p["commit"] == "f" * 40 and p["dirty"] is False
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", p["date"])
    assert "driver" in provenance.line(p) and "132 SMs" in provenance.line(p)
