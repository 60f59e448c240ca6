"""Where a GPU number came from: device, driver, CUDA, library versions, date and commit."""

from __future__ import annotations

import datetime as dt
import os
import platform
import shutil
import subprocess
from pathlib import Path


def _run(cmd: list[str], cwd: Path | None = None) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        out = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=20, check=True)
    except (subprocess.SubprocessError, OSError):
        return None
    return out.stdout.strip() or None


def git_commit(root: Path) -> tuple[str, bool]:
    """(commit, dirty) of the checkout at `root`, or of INFRALENS_COMMIT where there is no .git.

    The lent GPU machine receives a copy of the working tree without .git: the caller passes the
    commit through INFRALENS_COMMIT (a trailing '+dirty' marks uncommitted changes).
    """
    commit = _run(["git", "rev-parse", "HEAD"], cwd=root)
    if commit:
        dirty = bool(_run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root))
        return commit, dirty
    given = os.environ.get("INFRALENS_COMMIT", "unknown")
    return given.removesuffix("+dirty"), given.endswith("+dirty")


def collect(root: Path) -> dict:
    """Provenance of this CUDA machine; torch must see a GPU."""
    import torch

    props = torch.cuda.get_device_properties(0)
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    driver = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    commit, dirty = git_commit(root)
    return {
        "gpu": props.name,
        "sm_count": props.multi_processor_count,
        "memory_bytes": props.total_memory,
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver.splitlines()[0] if driver else "unknown",
        "cuda": torch.version.cuda or "unknown",
        "torch": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "dirty": dirty,
    }


def line(p: dict) -> str:
    """One human line: the provenance the book prints under every GPU result."""
    commit = p.get("commit", "unknown")[:10] + (" (uncommitted changes)" if p.get("dirty") else "")
    return (
        f"{p['gpu']} · {p['sm_count']} SMs · driver {p['driver']} · CUDA {p['cuda']} · "
        f"torch {p['torch']} · triton {p['triton']} · {p['date'].replace('T', ' ')} · "
        f"commit {commit}"
    )
