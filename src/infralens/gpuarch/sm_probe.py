"""Measure how an SM issues and holds work, on the GPU itself (``sm_probe.cu``).

* :func:`measure_ffma_issue` times chains of dependent FMAs in one block of 1 to 32 warps. With one
  warp the cycles per FMA are the dependent-issue latency; the FMA warp-instructions per clock
  then grow with the warps until every scheduler issues one per clock.
* :func:`measure_residency` launches spinning blocks that record the SM they run on (``%smid``)
  and their start and end on the global timer (``%globaltimer``); :func:`max_concurrent` counts
  how many overlapped on each SM. That is residency observed, which
  ``cudaOccupancyMaxActiveBlocksPerMultiprocessor`` (a calculation) cannot show.
* :func:`convergence_barriers` reads the SASS of ``sm_divergent`` (``cuobjdump -sass``) for the
  convergence-barrier instructions the compiler places around its branch.

The library builds without a GPU (:func:`build`); the measurements need one and raise
:class:`ProbeError` without it. :func:`max_concurrent` is pure Python.
"""

from __future__ import annotations

import ctypes
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from infralens.tools import nvcc as nvcc_tools

from .occupancy import Kernel, occupancy
from .occupancy_probe import INT, LONGLONG, STRING, ProbeError, ProbeLibrary, build_probe

__all__ = ["SOURCE", "SMProbe", "build", "max_concurrent", "measure_ffma_issue",
           "measure_residency", "RESIDENCY_CASES", "resident_kernel", "check_residency",
           "convergence_barriers", "parse_convergence_ops", "loop_bodies", "ffma_loop_mix",
           "ProbeError"]

SOURCE = Path(__file__).with_name("sm_probe.cu")


def build(arch: str = "sm_90", *, force: bool = False) -> Path:
    """Compile ``sm_probe.cu`` into a shared library for ``arch`` (cached like every nvcc build)."""
    return build_probe(SOURCE, arch, force=force).library


class SMProbe(ProbeLibrary):
    """The compiled library, one method per extern "C" function."""

    SOURCE = SOURCE
    ERROR_STRING = "sm_probe_error_string"
    FUNCTIONS = {
        "sm_probe_error_string": (None, STRING),
        "sm_probe_ffma": ([INT, INT, ctypes.POINTER(LONGLONG)], INT),
        "sm_probe_resident": ([INT, INT, LONGLONG, LONGLONG, ctypes.POINTER(ctypes.c_uint),
                               ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)],
                              INT),
    }

    def ffma_cycles(self, threads: int, steps: int) -> int:
        """SM cycles for one block of ``threads`` threads to run ``steps`` dependent FMAs each."""
        cycles = ctypes.c_longlong()
        self._check(self._lib.sm_probe_ffma(threads, steps, ctypes.byref(cycles)),
                    f"ffma chain, {threads} threads")
        return cycles.value

    def resident(self, grid: int, threads: int, dynamic_smem: int = 0,
                 spin_ns: int = 200_000) -> list[tuple[int, int, int]]:
        """(SM id, start ns, end ns) of each of ``grid`` spinning blocks."""
        smid = (ctypes.c_uint * grid)()
        start, end = (ctypes.c_ulonglong * grid)(), (ctypes.c_ulonglong * grid)()
        err = self._lib.sm_probe_resident(grid, threads, dynamic_smem, spin_ns, smid, start, end)
        self._check(err, f"resident blocks, {grid} x {threads}, {dynamic_smem} B")
        return list(zip(smid, start, end, strict=True))


# [gpuarch:residency-count]
def max_concurrent(blocks: Iterable[tuple[int, int, int]]) -> dict[int, int]:
    """For each SM, the largest number of blocks whose [start, end) intervals overlap at one time:
    sweep the starts (+1) and ends (-1) in time order, an end before a start at the same instant."""
    events: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for sm, start, end in blocks:
        if end < start:
            raise ValueError(f"a block on SM {sm} ends ({end}) before it starts ({start})")
        events[sm] += [(start, 1), (end, -1)]
    peak = {}
    for sm, evs in events.items():
        live = best = 0
        for _, step in sorted(evs):  # (t, -1) sorts before (t, +1)
            live += step
            best = max(best, live)
        peak[sm] = best
    return peak
# [/gpuarch:residency-count]


def measure_residency(probe: SMProbe, threads: int, dynamic_smem: int = 0, *, sms: int,
                      blocks_per_sm: int, spin_ns: int = 200_000) -> dict:
    """Launch ``2 x blocks_per_sm`` spinning blocks per SM (twice what should fit, so that every
    SM is full while the first wave spins) and count the most that overlapped on each SM."""
    grid = 2 * max(1, blocks_per_sm) * sms
    peak = max_concurrent(probe.resident(grid, threads, dynamic_smem, spin_ns))
    counts = sorted(peak.values())
    return {"threads": threads, "dynamic_smem": dynamic_smem, "grid": grid, "sms_seen": len(peak),
            "max_resident_min": counts[0], "max_resident_max": counts[-1]}


#: (threads per block, dynamic shared memory in bytes) of the residency check: block sizes that
#: the warp slots or the block slots limit, then shared-memory sizes that the SM's shared memory
#: limits.
RESIDENCY_CASES = ((1024, 0), (512, 0), (256, 0), (128, 0), (64, 0), (32, 0),
                   (256, 48 * 1024), (256, 64 * 1024), (256, 100 * 1024), (128, 200 * 1024))


def resident_kernel(threads: int, dynamic_smem: int, arch: str = "sm_90") -> Kernel:
    """``sm_resident`` as the calculator sees it: its registers, static shared memory and
    barriers from ptxas's report for ``arch``, and the launch's block size and shared memory
    (``sm_probe_resident`` raises the kernel's dynamic-shared-memory limit to what it asks)."""
    (res,) = [r for r in build_probe(SOURCE, arch).resources_for(arch) if r.kernel == "sm_resident"]
    return Kernel(threads, res.registers, res.shared_bytes, dynamic_smem,
                  max_dynamic_smem_bytes=dynamic_smem or None, barriers=max(1, res.barriers),
                  name="sm_resident")


def check_residency(probe: SMProbe, cases: Sequence[tuple[int, int]] = RESIDENCY_CASES, *,
                    cc: tuple[int, int] = (9, 0), sms: int, spin_ns: int = 200_000) -> list[dict]:
    """For each case, the calculator's resident blocks per SM (:func:`occupancy`, for compute
    capability ``cc``) and the most blocks :func:`measure_residency` saw together on one SM."""
    rows = []
    for threads, dyn in cases:
        calc = occupancy(resident_kernel(threads, dyn, f"sm_{cc[0]}{cc[1]}"), cc)
        seen = measure_residency(probe, threads, dyn, sms=sms, blocks_per_sm=calc.blocks_per_sm,
                                 spin_ns=spin_ns)
        rows.append({**seen, "calc_blocks": calc.blocks_per_sm, "limiters": list(calc.limiters),
                     "registers": calc.kernel.registers_per_thread})
    return rows


def measure_ffma_issue(probe: SMProbe, warps: Sequence[int] = (1, 2, 4, 8, 16, 32), *,
                       steps: int = 4096, warp_size: int = 32) -> list[dict]:
    """Cycles per dependent FMA for one warp, and FMA warp-instructions per clock per SM for
    blocks of ``warps`` warps (the SM's schedulers together)."""
    rows = []
    for w in warps:
        cycles = probe.ffma_cycles(w * warp_size, steps)
        rows.append({"warps": w, "cycles": cycles, "cycles_per_fma": cycles / steps,
                     "warp_ffma_per_clock": w * steps / cycles})
    return rows


# [gpuarch:convergence-sass]
def parse_convergence_ops(sass: str, kernel: str) -> list[str]:
    """One kernel's convergence-barrier and warp-synchronizing instructions in ``cuobjdump -sass``
    text, in program order (``BSSY B0``, ``BSYNC B0``, ``WARPSYNC``, ``BREAK``, ...)."""
    match = re.search(rf"Function : {re.escape(kernel)}\n(.*?)(?=\n\s*Function :|\Z)", sass, re.S)
    if not match:
        raise ValueError(f"no function {kernel} in this SASS")
    out = []
    for op, mods, args in re.findall(r"\b(BSSY|BSYNC|WARPSYNC|BREAK|BMOV)((?:\.\w+)*)([^;]*);",
                                     match.group(1)):
        barrier = re.search(r"\bB\d+\b", args)
        out.append(f"{op}{mods} {barrier.group(0)}" if barrier else f"{op}{mods}")
    return out
# [/gpuarch:convergence-sass]


def convergence_barriers(arch: str = "sm_90") -> list[str] | None:
    """:func:`parse_convergence_ops` of ``sm_divergent`` as compiled for ``arch``; None where
    cuobjdump (with nvdisasm) is not installed."""
    out = nvcc_tools.sass(build(arch), arch)
    return None if out is None else parse_convergence_ops(out, "sm_divergent")


# [gpuarch:loop-mix]
_SASS_INSTRUCTION = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)([^;]*);")


def loop_bodies(sass: str, kernel: str) -> list[list[str]]:
    """The opcodes of every loop in one kernel of ``cuobjdump -sass`` text: for each backward
    branch (``BRA 0x...`` to an address at or before its own), the instructions from the target
    to the branch, in program order."""
    match = re.search(rf"Function : {re.escape(kernel)}\n(.*?)(?=\n\s*Function :|\Z)", sass, re.S)
    if not match:
        raise ValueError(f"no function {kernel} in this SASS")
    code = [(int(addr, 16), op, args) for addr, op, args in _SASS_INSTRUCTION.findall(match.group(1))]
    loops = []
    for addr, op, args in code:
        target = re.search(r"0x([0-9a-f]+)", args) if op.startswith("BRA") else None
        if target and int(target.group(1), 16) <= addr:
            loops.append([o for a, o, _ in code if int(target.group(1), 16) <= a <= addr])
    return loops
# [/gpuarch:loop-mix]


def ffma_loop_mix(arch: str = "sm_90") -> dict | None:
    """The unrolled loop of ``sm_ffma_chain`` (the loop with the most FFMAs): its FFMAs and all
    its instructions. None where cuobjdump is not installed."""
    out = nvcc_tools.sass(build(arch), arch)
    if out is None:
        return None
    body = max(loop_bodies(out, "sm_ffma_chain"), key=lambda ops: ops.count("FFMA"))
    return {"ffma": body.count("FFMA"), "instructions": len(body), "ops": body}
