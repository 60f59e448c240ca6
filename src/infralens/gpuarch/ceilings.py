"""The measured ceilings of the GPU a cell runs on, for the roofline of Chapter 1.

Two numbers bound every kernel: how fast the GPU moves bytes through HBM and how fast it
multiplies matrices. :func:`measure_ceilings` measures both in one run (a device-to-device copy
from :mod:`infralens.kernels.triton_copy`, and a bf16 matmul large enough to be compute-bound),
then places kernels between them: a sweep of matmuls with a growing number of rows against one
weight matrix, whose arithmetic intensity climbs from the bandwidth slope to the compute roof,
and an elementwise add far below the ridge. It also asks ``nvidia-smi`` for the SM clock while
the matmul runs, because the datasheet peak assumes a clock the GPU may not hold under load.

Everything returns plain JSON-able dicts (the GPU record). The functions run on the CPU too,
with tiny sizes, so the tests exercise the same code.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Sequence

from infralens.tools.bench import bench_ms

from .roofline import Point, Roof, gemm_bytes, gemm_flops, gemm_intensity

__all__ = ["measure_matmul", "measure_add", "sm_clock_under_load", "measure_ceilings",
           "points_of", "measured_roof", "DEFAULT_N", "DEFAULT_COPY_BYTES", "DEFAULT_SWEEP",
           "DEFAULT_ADD_ELEMENTS"]

#: Side of the square bf16 matmul that measures the arithmetic ceiling.
DEFAULT_N = 8192
#: Bytes copied to measure the bandwidth ceiling: far larger than any L2.
DEFAULT_COPY_BYTES = 2 * 1024**3
#: Rows of the skinny matmuls (tokens against one n x n weight): 1 to DEFAULT_N.
DEFAULT_SWEEP = tuple(2**i for i in range(DEFAULT_N.bit_length()))
#: Elements of each operand of the elementwise add.
DEFAULT_ADD_ELEMENTS = 2**28


# [gpuarch:measure-matmul]
def measure_matmul(m: int, n: int, k: int, *, device: str = "cuda", dtype: str = "bfloat16",
                   rep_ms: float = 100) -> dict:
    """FLOP/s of ``torch.matmul`` on (m x k) @ (k x n), with its ideal arithmetic intensity."""
    import torch

    dt = getattr(torch, dtype)
    a = torch.randn(m, k, device=device).to(dt)
    b = torch.randn(k, n, device=device).to(dt)
    ms = bench_ms(lambda: torch.matmul(a, b), device=device, rep_ms=rep_ms)
    e = a.element_size()
    return {"m": m, "n": n, "k": k, "dtype": dtype, "ms": ms,
            "flops_per_s": gemm_flops(m, n, k) / (ms * 1e-3),
            "bytes": gemm_bytes(m, n, k, e), "intensity": gemm_intensity(m, n, k, e)}
# [/gpuarch:measure-matmul]


def measure_add(n: int, *, device: str = "cuda", dtype: str = "bfloat16", rep_ms: float = 100) -> dict:
    """FLOP/s of z = x + y: one FLOP per element, three elements of traffic."""
    import torch

    dt = getattr(torch, dtype)
    x = torch.randn(n, device=device).to(dt)
    y = torch.randn(n, device=device).to(dt)
    z = torch.empty_like(x)
    ms = bench_ms(lambda: torch.add(x, y, out=z), device=device, rep_ms=rep_ms)
    moved = 3 * n * x.element_size()
    return {"op": "add", "n": n, "dtype": dtype, "ms": ms, "flops_per_s": n / (ms * 1e-3),
            "bytes_per_s": moved / (ms * 1e-3), "intensity": n / moved}


def _smi(gpu_id: str | None) -> dict | None:
    """SM clock, its maximum, power and its limit, from nvidia-smi (None if unavailable)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    cmd = [exe, "--query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu",
           "--format=csv,noheader,nounits"]
    if gpu_id:
        cmd.append(f"--id={gpu_id}")
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout
        fields = [f.strip() for f in out.strip().splitlines()[0].split(",")]
        keys = ("sm_clock_mhz", "sm_clock_max_mhz", "power_w", "power_limit_w", "temperature_c")
        return {key: float(v) for key, v in zip(keys, fields, strict=True)}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def sm_clock_under_load(m: int = DEFAULT_N, *, device: str = "cuda", seconds: float = 2.0) -> dict | None:
    """nvidia-smi's reading while a queue of bf16 matmuls keeps the GPU busy.

    The matmuls are enqueued first (the launches return at once), so nvidia-smi samples the GPU
    in the middle of the work, not after it.
    """
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return None
    a = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    b = torch.randn(m, m, device=device, dtype=torch.bfloat16)
    torch.matmul(a, b)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    torch.matmul(a, b)
    torch.cuda.synchronize()
    per_call = max(time.perf_counter() - t0, 1e-4)
    try:
        gpu_id = f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    except (AttributeError, RuntimeError):
        gpu_id = None
    for _ in range(max(1, int(seconds / per_call))):
        torch.matmul(a, b)
    reading = _smi(gpu_id) or _smi(None)
    torch.cuda.synchronize()
    return reading


# [gpuarch:ceilings]
def measure_ceilings(*, device: str = "cuda", n: int = DEFAULT_N,
                     copy_bytes: int = DEFAULT_COPY_BYTES, sweep: Sequence[int] = DEFAULT_SWEEP,
                     add_elements: int = DEFAULT_ADD_ELEMENTS, rep_ms: float = 100) -> dict:
    """One run: copy bandwidth, the n^3 bf16 matmul rate, a skinny-matmul sweep and an add."""
    import torch

    out: dict = {"device": torch.cuda.get_device_name() if device.startswith("cuda") else "cpu"}
    if device.startswith("cuda"):
        from infralens.kernels.triton_copy import measure_copy_bandwidth

        copy = measure_copy_bandwidth(copy_bytes)  # reads and writes every byte: 2 x bytes moved
    else:
        x = torch.randn(copy_bytes // 4)
        y = torch.empty_like(x)
        ms = bench_ms(lambda: y.copy_(x), device=device, rep_ms=rep_ms)
        copy = {"n_bytes": copy_bytes, "torch": {"ms": ms, "gbps": 2 * copy_bytes / (ms * 1e-3) / 1e9}}
    out["copy"] = copy
    out["copy_bytes_per_s"] = max(v["gbps"] for v in copy.values() if isinstance(v, dict)) * 1e9
    out["matmul"] = measure_matmul(n, n, n, device=device, rep_ms=rep_ms)
    out["clocks"] = sm_clock_under_load(n, device=device)
    out["sweep"] = [measure_matmul(m, n, n, device=device, rep_ms=rep_ms) for m in sweep]
    out["add"] = measure_add(add_elements, device=device, rep_ms=rep_ms)
    return out
# [/gpuarch:ceilings]


def measured_roof(results: dict) -> Roof:
    """The roofline of the measured ceilings: the matmul rate and the copy bandwidth."""
    return Roof("measured", results["matmul"]["flops_per_s"], results["copy_bytes_per_s"])


def points_of(results: dict) -> list[Point]:
    """The sweep and the add of a :func:`measure_ceilings` result, as roofline points."""
    pts = [Point(f"m={r['m']}", r["intensity"], r["flops_per_s"]) for r in results["sweep"]]
    add = results["add"]
    pts.append(Point("add", add["intensity"], add["flops_per_s"]))
    return pts
