"""Nsight Compute from Python: run a program under ``ncu`` and read its counters back.

:func:`profile` runs any command under ``ncu --csv`` with a list of metrics, drops the metrics
this GPU does not offer (and lists them), and returns one dict per kernel. Clock control is off:
the counters the book reads (bytes, wavefronts, instructions) do not depend on clocks.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import io
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

SHARED_METRICS = (
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "smsp__sass_inst_executed_op_shared_ld.sum",
    "smsp__sass_inst_executed_op_shared_st.sum",
)
#: What a fusion changes: DRAM bytes both ways, the 32-byte sectors the SMs write into L2, and
#: each kernel's duration. A kernel's DRAM write count misses the dirty lines still in L2 when it
#: ends (the profiler's cache flush writes them back outside the kernel's measurement); the L2
#: write sectors requested by the SMs (``srcunit_tex``) count every byte it stored. All L2 write
#: sectors (``lts__t_sectors_op_write``) count more than the SMs store (probably writes forwarded
#: between the L2's partitions, not isolated), which is why they are kept apart.
DRAM_METRICS = ("dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
                "lts__t_sectors_op_write.sum", "gpu__time_duration.sum")
#: The reduction ladder adds divergence (threads per warp instruction, all and predicated-on),
#: instruction count, occupancy and DRAM traffic.

def find_ncu() -> str | None:
    found = shutil.which("ncu")
    if found:
        return found
    candidates = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu")) + ["/usr/local/cuda/bin/ncu"]
    return next((c for c in reversed(candidates) if Path(c).is_file()), None)


def ncu_available_metrics(ncu: str) -> set[str]:
    """Base names of the metrics this GPU and ncu offer (``ncu --query-metrics``)."""
    out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120)
    return {m.group(1) for line in out.stdout.splitlines()
            if (m := re.match(r"^([a-z0-9]+__[A-Za-z0-9_]+)\s", line))}


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> dict[str, dict[str, float | None]]:
    """``ncu --csv`` (details page: one row per kernel and metric) -> {kernel: {metric: value}}.

    Kernel names are cut at the argument list; lines ncu prints around the table are ignored.
    A kernel launched several times keeps its first launch's values.
    """
    out: dict[str, dict[str, float | None]] = {}
    for kernel, row in _first_launch_rows(text):
        out.setdefault(kernel, {})[row["Metric Name"]] = _number(row.get("Metric Value", ""))
    return out


def _first_launch_rows(text: str) -> Iterable[tuple[str, dict[str, str]]]:
    """(kernel, row) of ncu's details CSV, the first launch of each kernel only; kernel names cut
    at the argument list, lines ncu prints around the table ignored."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    seen: dict[str, str] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        kernel = row.get("Kernel Name", "").split("(")[0].strip()
        if not kernel or not row.get("Metric Name"):
            continue
        if seen.setdefault(kernel, row.get("ID", "")) != row.get("ID", ""):
            continue  # a later launch of a kernel already read
        yield kernel, row


def parse_ncu_launches(text: str) -> list[dict]:
    """``ncu --csv`` (details page) -> one dict per kernel launch, in launch order:
    ``{"kernel": name cut at the argument list, "id": launch ID, metric: value, ...}``."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    out: dict[str, dict] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        kernel = row.get("Kernel Name", "").split("(")[0].strip()
        if not kernel or not row.get("Metric Name") or not row.get("ID", "").strip().isdigit():
            continue
        launch = out.setdefault(row["ID"], {"kernel": kernel, "id": int(row["ID"])})
        launch[row["Metric Name"]] = _number(row.get("Metric Value", ""))
    return sorted(out.values(), key=lambda launch: launch["id"])


def launch_bytes(launch: Mapping[str, float | None]) -> dict[str, float]:
    """One launch of :data:`DRAM_METRICS` in bytes and seconds: ``read`` (DRAM), ``write`` (DRAM),
    ``stored`` (sectors the SMs wrote into L2, x 32 bytes), ``seconds``."""
    return {"read": launch.get("dram__bytes_read.sum") or 0.0,
            "write": launch.get("dram__bytes_write.sum") or 0.0,
            "stored": 32 * (launch.get("lts__t_sectors_srcunit_tex_op_write.sum") or 0.0),
            "seconds": (launch.get("gpu__time_duration.sum") or 0.0) * 1e-9}


def launch_totals(launches: Iterable[Mapping[str, float | None]]) -> dict[str, float]:
    """:func:`launch_bytes` summed over launches, with their count under ``kernels``."""
    launches = list(launches)
    sums = {key: sum(launch_bytes(k)[key] for k in launches)
            for key in ("read", "write", "stored", "seconds")}
    return {**sums, "kernels": len(launches)}


def format_launches(launches: Iterable[Mapping[str, float | None]], width: int = 56) -> str:
    """One line per launch: kernel name (cut to ``width``), DRAM MB read and written, MB stored
    into L2, microseconds."""
    lines = []
    for launch in launches:
        b = launch_bytes(launch)
        lines.append(f"  {str(launch.get('kernel'))[:width]:<{width}} read {b['read'] / 1e6:7.1f} MB, write "
                     f"{b['write'] / 1e6:7.1f} MB (stored {b['stored'] / 1e6:7.1f} MB), "
                     f"{b['seconds'] * 1e6:7.1f} µs")
    return "\n".join(lines)


def profile_variants(driver: str, variants: Iterable[str], args: Sequence = (),
                     metrics: Iterable[str] = DRAM_METRICS, ncu: str | None = None,
                     timeout: float = 300.0) -> dict:
    """Every kernel launch of each variant under Nsight Compute, one fresh process per variant:
    the process calls ``driver(variant, *args)`` (``driver`` a ``"module:function"`` path, ``args``
    JSON values), which runs its work in :func:`region`, as :func:`warm_then_region` does.
    Returns ``{"ncu_version", "variants": {variant: launches}}``."""
    import json
    import sys

    code = ("import importlib, json, sys; module, name = sys.argv[1].split(':'); "
            "getattr(importlib.import_module(module), name)(sys.argv[2], *json.loads(sys.argv[3]))")
    out: dict = {"variants": {}}
    for variant in variants:
        res = profile([sys.executable, "-c", code, driver, variant, json.dumps(list(args))], metrics,
                      ncu=ncu, from_start=False, timeout=timeout)
        out["ncu_version"] = res["ncu_version"]
        out["variants"][variant] = res["launches"]
    return out


def warm_then_region(fn: Callable[[], object]) -> None:
    """Call ``fn`` once (compiling, autotuning, warming caches of code), then once more inside
    :func:`region`: the launches a profile of the region sees are one steady-state call's."""
    fn()
    with region():
        fn()


@contextlib.contextmanager
def region() -> Iterator[None]:
    """The part of a program that :func:`profile` with ``from_start=False`` measures: the GPU is
    idle when it starts, and everything launched inside it has finished when it ends."""
    import torch

    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    try:
        yield
        torch.cuda.synchronize()
    finally:
        torch.cuda.cudart().cudaProfilerStop()


def profile(command: Sequence[str], metrics: Iterable[str], *, kernel_regex: str | None = None,
            ncu: str | None = None, env: Mapping[str, str] | None = None,
            timeout: float = 300.0, from_start: bool = True) -> dict:
    """Run ``command`` under Nsight Compute and return the counters of every kernel it launches.

    Metrics this GPU does not offer are dropped and listed under ``missing``. Under ``kernels`` a
    kernel launched several times keeps its first launch's values; ``launches`` lists every
    launch in order. With ``from_start=False`` only the launches inside the program's
    :func:`region` are profiled.
    """
    ncu = ncu or find_ncu()
    if ncu is None:
        raise FileNotFoundError("ncu (Nsight Compute) was not found")
    metrics = list(metrics)
    available = ncu_available_metrics(ncu)
    present = [m for m in metrics if m.split(".")[0] in available] if available else metrics
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = [ncu, "--csv", "--clock-control", "none", "--log-file", str(log),
               "--metrics", ",".join(present)]
        if not from_start:
            cmd += ["--profile-from-start", "off"]
        if kernel_regex:
            cmd += ["--kernel-name", f"regex:{kernel_regex}"]
        proc = subprocess.run([*cmd, *command], capture_output=True, text=True, timeout=timeout,
                              env=None if env is None else dict(env))
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
    if '"ID"' not in text:  # some ncu versions print the table to stdout despite --log-file
        text += "\n" + proc.stdout
    if proc.returncode != 0 or '"ID"' not in text:
        tail = "\n".join((proc.stdout + proc.stderr + text).strip().splitlines()[-15:])
        raise RuntimeError(f"ncu failed (exit {proc.returncode}):\n{tail}")
    return {"ncu_version": version.splitlines()[-1] if version else "", "metrics": present,
            "missing": [m for m in metrics if m not in present], "kernels": parse_ncu_csv(text),
            "launches": parse_ncu_launches(text)}


# [ncu:source]
#: Per-instruction shared-memory columns of Nsight Compute's Source page (the SourceCounters
#: section): wavefronts each instruction took, the wavefronts its addresses require ("Ideal"),
#: the difference ("Excessive") and the average N-way conflict per executed instruction ("N-Way").
SOURCE_SHARED_COLUMNS = ("Instructions Executed", "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal",
                         "L1 Wavefronts Shared Excessive", "L1 Conflicts Shared N-Way")


def parse_source_csv(text: str) -> dict[str, list[dict[str, str]]]:
    """``ncu -i REPORT --page source --csv --print-source sass`` -> {kernel: [one dict per SASS
    instruction, by column]}. Each kernel's listing starts with a ``"Kernel Name","<name>",`` line;
    a kernel listed again keeps its first listing."""
    out: dict[str, list[dict[str, str]]] = {}
    for block in text.split('"Kernel Name",')[1:]:
        head, _, table = block.partition("\n")
        kernel = head.strip().strip(",").strip('"').split("(")[0].strip()
        if kernel and kernel not in out:
            out[kernel] = list(csv.DictReader(io.StringIO(table)))
    return out


def shared_instructions(rows: Iterable[Mapping[str, str]]) -> list[dict]:
    """The shared-memory instructions of one kernel's Source-page rows, with the columns of
    :data:`SOURCE_SHARED_COLUMNS` as numbers and the instruction's SASS text."""
    return [{"sass": " ".join(r.get("Source", "").split()), "operation": r.get("Access Operation"),
             **{c: _number(r.get(c, "")) for c in SOURCE_SHARED_COLUMNS}}
            for r in rows if r.get("Address Space") == "Shared"]


def profile_source(command: Sequence[str], metrics: Iterable[str] = (), *,
                   kernel_regex: str | None = None, ncu: str | None = None,
                   env: Mapping[str, str] | None = None, timeout: float = 300.0) -> dict:
    """Run ``command`` under Nsight Compute with the SourceCounters section (and ``metrics``),
    and return, per kernel, its shared-memory instructions one by one (:func:`shared_instructions`)
    and its aggregate counters: the two views of the same launches, from one report."""
    ncu = ncu or find_ncu()
    if ncu is None:
        raise FileNotFoundError("ncu (Nsight Compute) was not found")
    metrics = list(metrics)
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "source"
        cmd = [ncu, "--clock-control", "none", "--section", "SourceCounters", "-o", str(report)]
        if metrics:
            cmd += ["--metrics", ",".join(metrics)]
        if kernel_regex:
            cmd += ["--kernel-name", f"regex:{kernel_regex}"]
        proc = subprocess.run([*cmd, *command], capture_output=True, text=True, timeout=timeout,
                              env=None if env is None else dict(env))
        rep = report.with_suffix(".ncu-rep")
        if proc.returncode != 0 or not rep.is_file():
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise RuntimeError(f"ncu failed (exit {proc.returncode}):\n{tail}")
        read = [ncu, "-i", str(rep), "--csv", "--print-units", "base"]
        source = subprocess.run([*read, "--page", "source", "--print-source", "sass"],
                                capture_output=True, text=True, timeout=timeout).stdout
        details = subprocess.run([*read, "--page", "raw"] if metrics else [*read, "--page", "details"],
                                 capture_output=True, text=True, timeout=timeout).stdout
    rows = parse_source_csv(source)
    counters = parse_ncu_csv(details) if not metrics else parse_raw_csv(details)
    return {"ncu_version": version.splitlines()[-1] if version else "",
            "kernels": {k: {"shared_instructions": shared_instructions(r),
                            "counters": {m: counters.get(k, {}).get(m) for m in metrics}}
                        for k, r in rows.items()}}


def parse_raw_csv(text: str) -> dict[str, dict[str, float | None]]:
    """``ncu -i REPORT --page raw --csv`` (one row per kernel launch, one column per metric, a
    second header line of units) -> {kernel: {metric: value}}; a kernel's first launch counts."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    out: dict[str, dict[str, float | None]] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        kernel = row.get("Kernel Name", "").split("(")[0].strip()
        if not kernel or not row.get("ID", "").strip().isdigit() or kernel in out:
            continue  # the units line, or a later launch of a kernel already read
        out[kernel] = {m: _number(v) for m, v in row.items() if m and "__" in m}
    return out
# [/ncu:source]


# [ncu:sections]
def parse_sections_csv(text: str) -> dict[str, dict[str, dict[str, dict]]]:
    """``ncu --csv`` of ``--section`` runs -> {kernel: {section: {metric: {"value", "unit"}}}}.

    Like :func:`parse_ncu_csv`, but keeps each metric's section and unit, which the section pages
    (Speed Of Light, Memory Workload, Scheduler, Warp State) need to be read as ncu shows them.
    """
    out: dict[str, dict[str, dict[str, dict]]] = {}
    for kernel, row in _first_launch_rows(text):
        section = row.get("Section Name", "") or "metrics"
        out.setdefault(kernel, {}).setdefault(section, {})[row["Metric Name"]] = {
            "value": _number(row.get("Metric Value", "")), "unit": row.get("Metric Unit", "")}
    return out


def profile_sections(command: Sequence[str], sections: Iterable[str], metrics: Iterable[str] = (), *,
                     kernel_regex: str | None = None, launch_skip: int = 0, launch_count: int = 1,
                     ncu: str | None = None, timeout: float = 600.0) -> dict:
    """Run ``command`` under Nsight Compute with whole ``sections`` (and extra ``metrics``) and
    return :func:`parse_sections_csv`'s table, the ncu version and the raw CSV."""
    ncu = ncu or find_ncu()
    if ncu is None:
        raise FileNotFoundError("ncu (Nsight Compute) was not found")
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip()
    metrics = list(metrics)
    available = ncu_available_metrics(ncu) if metrics else set()
    present = [m for m in metrics if m.split(".")[0] in available] if available else metrics
    cmd = [ncu, "--csv", "--clock-control", "none", "--launch-skip", str(launch_skip),
           "--launch-count", str(launch_count)]
    for section in sections:
        cmd += ["--section", section]
    if present:
        cmd += ["--metrics", ",".join(present)]
    if kernel_regex:
        cmd += ["--kernel-name", f"regex:{kernel_regex}"]
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        proc = subprocess.run([*cmd, "--log-file", str(log), *command], capture_output=True, text=True,
                              timeout=timeout)
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
    if '"ID"' not in text:
        text += "\n" + proc.stdout
    if proc.returncode != 0 or '"ID"' not in text:
        tail = "\n".join((proc.stdout + proc.stderr + text).strip().splitlines()[-15:])
        raise RuntimeError(f"ncu failed (exit {proc.returncode}):\n{tail}")
    return {"ncu_version": version.splitlines()[-1] if version else "",
            "missing": [m for m in metrics if m not in present],
            "kernels": parse_sections_csv(text), "csv": text}
# [/ncu:sections]
