"""The measured ceilings of the GPU a cell runs on, for the roofline of Chapter 1.

Two numbers bound every kernel: how fast the GPU moves bytes through HBM and how fast it
multiplies matrices. :func:`measure_ceilings` measures both in one run (a device-to-device copy
from :mod:`infralens.kernels.triton_copy`, and a bf16 matmul large enough to be compute-bound),
then places kernels between them: a sweep of matmuls with a growing number of rows against one
weight matrix, whose arithmetic intensity climbs from the bandwidth slope to the compute roof,
and an elementwise add far below the ridge. It also asks ``nvidia-smi`` for the SM clock while
the matmul runs, because the datasheet peak assumes a clock the GPU may not hold under load.

That reading is one sample, taken after the timed matmuls. :func:`matmul_with_telemetry` is the
stricter measurement: it times the same matmul several times while a background thread
(:class:`Sampler`) reads the SM clock and the power every few tens of milliseconds through NVML
(or nvidia-smi), and it keeps, for every timing, the samples taken during it; the spread of the
timings and of the clocks is then part of the result.

Everything returns plain JSON-able dicts (the GPU record). The functions run on the CPU too,
with tiny sizes, so the tests exercise the same code.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from infralens.tools.bench import bench, bench_ms

from .roofline import Point, Roof, gemm_bytes, gemm_flops, gemm_intensity

__all__ = ["measure_matmul", "measure_add", "sm_clock_under_load", "measure_ceilings",
           "points_of", "measured_roof", "DEFAULT_N", "DEFAULT_COPY_BYTES", "DEFAULT_SWEEP",
           "DEFAULT_ADD_ELEMENTS", "Sampler", "nvml_reader", "smi_reader", "default_reader",
           "measure_with_telemetry", "matmul_with_telemetry"]

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


#: A function that returns one reading ({"sm_clock_mhz", "power_w", ...}) or None.
Reader = Callable[[], "dict | None"]


def nvml_reader(uuid: str | None = None) -> Reader | None:
    """Read the SM clock, power and temperature through NVML (the ``pynvml`` module of
    nvidia-ml-py): the GPU with this UUID, or NVML's device 0. None where NVML is missing."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = (pynvml.nvmlDeviceGetHandleByUUID(uuid) if uuid
                  else pynvml.nvmlDeviceGetHandleByIndex(0))
    except Exception:  # no module, no driver, no such GPU: fall back to nvidia-smi
        return None

    def read() -> dict | None:
        try:
            return {"sm_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                    "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3,  # milliwatts
                    "temperature_c": float(pynvml.nvmlDeviceGetTemperature(
                        handle, pynvml.NVML_TEMPERATURE_GPU))}
        except Exception:
            return None

    return read


def smi_reader(gpu_id: str | None = None) -> Reader | None:
    """Read the same through ``nvidia-smi`` (slower: a process per reading). None without it."""
    if shutil.which("nvidia-smi") is None:
        return None
    return lambda: _smi(gpu_id)


def default_reader(device: str = "cuda") -> Reader | None:
    """NVML if it is installed, else nvidia-smi, for the GPU behind ``device``; None on the CPU."""
    if not str(device).startswith("cuda"):
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        uuid = f"GPU-{torch.cuda.get_device_properties(device).uuid}"
    except (AttributeError, RuntimeError):
        uuid = None
    return nvml_reader(uuid) or smi_reader(uuid)


class Sampler:
    """Calls ``read`` every ``interval_s`` seconds on a background thread and keeps each reading
    with the time it was taken (``time.perf_counter``). Use as a context manager."""

    def __init__(self, read: Reader | None, interval_s: float = 0.05):
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.read, self.interval_s = read, interval_s
        self.samples: list[tuple[float, dict]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            t = time.perf_counter()
            reading = self.read()
            if reading is not None:
                self.samples.append((t, reading))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> Sampler:
        if self.read is not None:
            self._thread = threading.Thread(target=self._run, name="telemetry", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def between(self, t0: float, t1: float) -> list[dict]:
        """The readings taken from t0 to t1."""
        return [r for t, r in list(self.samples) if t0 <= t <= t1]


def _summary(values: Sequence[float]) -> dict | None:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values),
            "n": len(values)}


def measure_with_telemetry(fn: Callable[[], object], flops: float, *, repeats: int = 5,
                           read: Reader | None = None, interval_s: float = 0.05,
                           device: str = "cuda", rep_ms: float = 200) -> dict:
    """Time ``fn`` ``repeats`` times with :func:`infralens.tools.bench.bench` while a
    :class:`Sampler` reads clock and power; each timing keeps the readings taken during it.

    Returns ``{"runs": [...], "flops_per_s": summary, "spread": (max - min) / median,
    "sm_clock_mhz": summary, "power_w": summary}``, each summary ``{"min", "median", "max", "n"}``
    (None where nothing was read)."""
    if repeats < 1:
        raise ValueError("repeats must be >= 1")
    runs = []
    # [gpuarch:telemetry-loop]
    with Sampler(read, interval_s) as sampler:
        for _ in range(repeats):
            t0 = time.perf_counter()
            timing = bench(fn, device=device, rep_ms=rep_ms)
            t1 = time.perf_counter()
            during = sampler.between(t0, t1)
            runs.append({**timing, "flops_per_s": flops / (timing["ms"] * 1e-3),
                         "sm_clock_mhz": _summary([r["sm_clock_mhz"] for r in during]),
                         "power_w": _summary([r["power_w"] for r in during])})
        every = sampler.between(float("-inf"), float("inf"))
    # [/gpuarch:telemetry-loop]
    rates = [r["flops_per_s"] for r in runs]
    return {"runs": runs, "interval_s": interval_s, "flops_per_s": _summary(rates),
            "spread": (max(rates) - min(rates)) / statistics.median(rates),
            "sm_clock_mhz": _summary([r["sm_clock_mhz"] for r in every]),
            "power_w": _summary([r["power_w"] for r in every])}


def matmul_with_telemetry(n: int = DEFAULT_N, *, repeats: int = 5, device: str = "cuda",
                          dtype: str = "bfloat16", read: Reader | None = None,
                          interval_s: float = 0.05, rep_ms: float = 200) -> dict:
    """The n^3 matmul of :func:`measure_matmul`, timed ``repeats`` times with the SM clock and the
    power sampled through every timing (:func:`measure_with_telemetry`; ``read`` defaults to
    :func:`default_reader`)."""
    import torch

    dt = getattr(torch, dtype)
    a = torch.randn(n, n, device=device).to(dt)
    b = torch.randn(n, n, device=device).to(dt)
    out = measure_with_telemetry(lambda: torch.matmul(a, b), gemm_flops(n, n, n), repeats=repeats,
                                 read=read if read is not None else default_reader(device),
                                 interval_s=interval_s, device=device, rep_ms=rep_ms)
    return {"n": n, "dtype": dtype, "device": str(device), **out}


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
