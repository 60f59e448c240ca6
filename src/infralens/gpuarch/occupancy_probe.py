"""Ask the CUDA runtime about real kernels, and compare its answers with :func:`occupancy`.

``occupancy_probe.cu`` holds six kernels that are limited by different resources, a pointer chase
for load latency, and extern "C" host functions around ``cudaFuncGetAttributes``,
``cudaFuncSetAttribute`` and ``cudaOccupancyMaxActiveBlocksPerMultiprocessor``. :func:`build`
compiles it with nvcc into a shared library for the GPU at hand; :class:`Probe` calls it through
ctypes; :func:`check_occupancy` runs :data:`CASES` through both the runtime and the calculator.

Without a GPU the library still builds and loads (the tests do that), and every query returns
the runtime's error, raised as :class:`ProbeError`. :func:`ptxas_report` reads the compiler's own
resource report (``-Xptxas -v``) and needs no GPU at all.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar, Self

from infralens.tools import nvcc as nvcc_tools

from .occupancy import Kernel, occupancy

__all__ = ["SOURCE", "CASES", "Case", "ProbeError", "ProbeLibrary", "Probe", "build", "build_probe",
           "nvcc", "ptxas_report", "check_occupancy", "CHASES", "measure_latency"]

SOURCE = Path(__file__).with_name("occupancy_probe.cu")
FUNC_FIELDS = ("num_regs", "shared_size_bytes", "local_size_bytes", "const_size_bytes",
               "max_threads_per_block", "max_dynamic_shared_size_bytes",
               "preferred_shmem_carveout", "binary_version")


class ProbeError(RuntimeError):
    """A CUDA runtime call of the probe failed; the message carries the runtime's error string."""


def nvcc() -> str:
    """The nvcc every kernel of the book builds with (:func:`infralens.tools.nvcc.find_nvcc`)."""
    found = nvcc_tools.find_nvcc()
    if found is None:
        raise nvcc_tools.NvccNotFound("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)")
    return found


def build_probe(source: Path, arch: str, *, force: bool = False) -> nvcc_tools.Build:
    """Compile a probe's ``.cu`` into a shared library for ``arch`` (:func:`infralens.tools.nvcc.build`,
    cached by source, flags and compiler)."""
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise ValueError(f"arch must look like sm_90, got {arch!r}")
    return nvcc_tools.build(source, (arch,), nvcc=nvcc(), force=force)


def build(arch: str = "sm_90", *, force: bool = False) -> Path:
    """Compile ``occupancy_probe.cu`` into a shared library for ``arch`` (:func:`build_probe`)."""
    return build_probe(SOURCE, arch, force=force).library


def ptxas_report(arch: str = "sm_90") -> dict[str, dict]:
    """Registers, barriers, static shared memory and spills per kernel, as ptxas reports them
    (parsed by :func:`infralens.tools.nvcc.parse_ptxas`). Needs nvcc, not a GPU."""
    return {r.kernel: {"registers": r.registers, "barriers": r.barriers, "smem_bytes": r.shared_bytes,
                       "spill_store_bytes": r.spill_store_bytes, "spill_load_bytes": r.spill_load_bytes}
            for r in build_probe(SOURCE, arch).resources_for(arch)}


INT, LONGLONG, STRING = ctypes.c_int, ctypes.c_longlong, ctypes.c_char_p


class ProbeLibrary:
    """A probe's shared library, loaded through ctypes.

    A subclass names its ``SOURCE``, declares its extern "C" functions in ``FUNCTIONS`` (name:
    ``(argtypes, restype)``, argtypes ``None`` where ctypes' default int conversion does), and
    names the one that turns an error code into the runtime's string (``ERROR_STRING``); a
    failed runtime call raises :class:`ProbeError` with that string.
    """

    SOURCE: ClassVar[Path]
    ERROR_STRING: ClassVar[str]
    FUNCTIONS: ClassVar[dict[str, tuple[list | None, type]]]

    def __init__(self, library: Path):
        self.path = Path(library)
        self._lib = ctypes.CDLL(str(self.path))
        for name, (argtypes, restype) in self.FUNCTIONS.items():
            fn = getattr(self._lib, name)
            fn.argtypes, fn.restype = argtypes, restype

    @classmethod
    def for_this_gpu(cls) -> Self:
        """Build for the compute capability of the current CUDA device (via torch) and load."""
        import torch

        major, minor = torch.cuda.get_device_capability()
        return cls(build_probe(cls.SOURCE, f"sm_{major}{minor}").library)

    def error_string(self, code: int) -> str:
        return getattr(self._lib, self.ERROR_STRING)(code).decode()

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            raise ProbeError(f"{what}: {self.error_string(err)} (error {err})")


# [gpuarch:probe-py]
class Probe(ProbeLibrary):
    """The compiled probe library, one method per extern "C" function."""

    SOURCE = SOURCE
    ERROR_STRING = "probe_error_string"
    FUNCTIONS = {
        "probe_error_string": (None, STRING),
        "probe_kernel_name": (None, STRING),
        "probe_device_attribute_name": (None, STRING),
        "probe_func_attributes": ([INT, ctypes.POINTER(LONGLONG)], INT),
        "probe_max_active_blocks": ([INT, INT, LONGLONG, ctypes.POINTER(INT)], INT),
        "probe_set_max_dynamic_smem": ([INT, INT], INT),
        "probe_set_carveout": ([INT, INT], INT),
        "probe_try_launch": ([INT, INT, LONGLONG], INT),
        "probe_chase": ([INT, LONGLONG, INT, INT, ctypes.c_ulonglong, ctypes.POINTER(ctypes.c_double),
                         ctypes.POINTER(ctypes.c_double)], INT),
    }

    def __init__(self, library: Path):
        super().__init__(library)
        self.kernels = [self._lib.probe_kernel_name(i).decode()
                        for i in range(self._lib.probe_num_kernels())]

    def _index(self, kernel: str) -> int:
        try:
            return self.kernels.index(kernel)
        except ValueError:
            raise ValueError(f"unknown kernel {kernel!r}; the probe has {self.kernels}") from None

    def device_attributes(self) -> dict[str, int]:
        out, value = {}, ctypes.c_int()
        for i in range(self._lib.probe_num_device_attributes()):
            name = self._lib.probe_device_attribute_name(i).decode()
            self._check(self._lib.probe_device_attribute(i, ctypes.byref(value)), name)
            out[name] = value.value
        return out

    def func_attributes(self, kernel: str) -> dict[str, int]:
        buf = (ctypes.c_longlong * len(FUNC_FIELDS))()
        self._check(self._lib.probe_func_attributes(self._index(kernel), buf), kernel)
        return dict(zip(FUNC_FIELDS, buf, strict=True))

    def set_max_dynamic_smem(self, kernel: str, nbytes: int) -> None:
        self._check(self._lib.probe_set_max_dynamic_smem(self._index(kernel), nbytes), kernel)

    def set_carveout(self, kernel: str, percent: int) -> None:
        self._check(self._lib.probe_set_carveout(self._index(kernel), percent), kernel)

    def max_active_blocks(self, kernel: str, block: int, dynamic_smem: int = 0) -> int:
        """cudaOccupancyMaxActiveBlocksPerMultiprocessor for one launch configuration."""
        blocks = ctypes.c_int()
        err = self._lib.probe_max_active_blocks(self._index(kernel), block, dynamic_smem,
                                                ctypes.byref(blocks))
        self._check(err, f"{kernel} x {block}")
        return blocks.value

    def try_launch(self, kernel: str, block: int, dynamic_smem: int = 0) -> int:
        """Launch on an empty problem; return the CUDA error code (0: it launched and ran)."""
        return int(self._lib.probe_try_launch(self._index(kernel), block, dynamic_smem))

    def chase(self, mode: int, nbytes: int, stride: int, steps: int, seed: int = 1) -> dict:
        """Latency of a dependent-load chain: mode 0 global (L1), 1 global (L2 only), 2 shared."""
        cycles, ns = ctypes.c_double(), ctypes.c_double()
        err = self._lib.probe_chase(mode, nbytes, stride, steps, seed, ctypes.byref(cycles),
                                    ctypes.byref(ns))
        self._check(err, f"chase mode {mode}, {nbytes} B")
        return {"cycles": cycles.value, "ns": ns.value}
# [/gpuarch:probe-py]


@dataclass(frozen=True)
class Case:
    """One launch configuration to ask both the runtime and the calculator about."""

    kernel: str
    block: int
    dynamic_smem: int = 0
    max_dynamic_smem: int | None = None  # raise the kernel's opt-in to this first
    carveout: int | None = None          # set a preferred carveout (percent) first
    why: str = ""


KIB = 1024

# [gpuarch:cases]
CASES: tuple[Case, ...] = (
    Case("occ_copy", 128, why="few registers: warps or block slots limit"),
    Case("occ_copy", 256),
    Case("occ_copy", 1024),
    Case("occ_copy", 32, why="one-warp blocks: the 32 block slots limit"),
    Case("occ_reduce_dyn", 256, 256 * 4, why="shared memory grows with the block"),
    Case("occ_reduce_dyn", 1024, 1024 * 4),
    Case("occ_transpose33", 256, why="4224 B static tile, 32 x 8 threads"),
    Case("occ_transpose33", 1024),
    Case("occ_sgemm_8x8", 256, why="many registers per thread: registers limit"),
    Case("occ_sgemm_8x8", 512, why="16 warps of registers: exactly one block's worth?"),
    Case("occ_sgemm_8x8", 1024, why="32 warps x the same registers: more than a block may hold"),
    Case("occ_sgemm_8x8_lb3", 256, why="__launch_bounds__(256, 3): fewer registers, spills"),
    Case("occ_stage_dyn", 256, 32 * KIB, why="dynamic shared memory below the 48 KiB default"),
    Case("occ_stage_dyn", 256, 64 * KIB, max_dynamic_smem=227 * KIB, why="opt-in above 48 KiB"),
    Case("occ_stage_dyn", 256, 76 * KIB, max_dynamic_smem=227 * KIB,
         why="76 KiB: three would fit in 228 KiB but for the 1 KiB reserved per block"),
    Case("occ_stage_dyn", 256, 75 * KIB, max_dynamic_smem=227 * KIB),
    Case("occ_stage_dyn", 256, 227 * KIB, max_dynamic_smem=227 * KIB, why="the per-block maximum"),
    Case("occ_stage_dyn", 256, 100 * KIB, why="over the kernel's dynamic limit without opt-in",
         max_dynamic_smem=48 * KIB),
    Case("occ_transpose33", 64, why="two-warp blocks: 32 block slots, 44 fit in shared memory"),
    Case("occ_transpose33", 64, carveout=25, why="the same with a 25% carveout preference"),
    Case("occ_reduce_dyn", 256, 40 * KIB, max_dynamic_smem=100 * KIB, carveout=50,
         why="a 50% carveout preference with 41 KiB blocks"),
)
# [/gpuarch:cases]


def _kernel_for(case: Case, attrs: dict, barriers: int) -> Kernel:
    return Kernel(threads_per_block=case.block, registers_per_thread=attrs["num_regs"],
                  static_smem_bytes=attrs["shared_size_bytes"], dynamic_smem_bytes=case.dynamic_smem,
                  max_dynamic_smem_bytes=attrs["max_dynamic_shared_size_bytes"], barriers=barriers,
                  name=case.kernel)


# [gpuarch:check]
def check_occupancy(probe: Probe, cases: Sequence[Case] = CASES, *,
                    cc: tuple[int, int] | None = None, barriers: dict[str, int] | None = None) -> dict:
    """Every case through cudaOccupancyMaxActiveBlocksPerMultiprocessor and through occupancy().

    The calculator gets the kernel's registers and static shared memory from cudaFuncGetAttributes
    and the per-SM limits from infralens.hardware, never from the device; the device's own
    attributes are recorded next to them for comparison. Attributes a case changes (opt-in,
    carveout) are set before it and restored after it. A runtime error is recorded, not raised.
    """
    dev = probe.device_attributes()
    cc = cc or (dev["compute_capability_major"], dev["compute_capability_minor"])
    barriers = barriers or {}
    rows = []
    for case in cases:
        default = probe.func_attributes(case.kernel)
        api: int | None = None
        api_error = ""
        try:
            if case.max_dynamic_smem is not None:  # never past what this device allows
                cap = dev["max_shared_memory_per_block_optin"] - default["shared_size_bytes"]
                probe.set_max_dynamic_smem(case.kernel, min(case.max_dynamic_smem, cap))
            if case.carveout is not None:
                probe.set_carveout(case.kernel, case.carveout)
            attrs = probe.func_attributes(case.kernel)
            try:
                api = probe.max_active_blocks(case.kernel, case.block, case.dynamic_smem)
            except ProbeError as err:
                api_error = str(err)
            launch = probe.try_launch(case.kernel, case.block, case.dynamic_smem)
        finally:
            probe.set_carveout(case.kernel, -1)
            probe.set_max_dynamic_smem(case.kernel, default["max_dynamic_shared_size_bytes"])
        occ = None
        if case.block > attrs["max_threads_per_block"]:
            calc, limiter, note = 0, "threads per block", "more threads than the kernel allows"
        else:
            occ = occupancy(_kernel_for(case, attrs, barriers.get(case.kernel, 1)), cc,
                            carveout_percent=case.carveout)
            calc, limiter, note = occ.blocks_per_sm, "+".join(occ.limiters), occ.invalid
        warps = -(-case.block // dev["warp_size"])
        rows.append({**asdict(case), "attributes": attrs, "api_blocks": api, "api_error": api_error,
                     "calc_blocks": calc, "match": api == calc, "limiter": limiter, "note": note,
                     "warps_per_block": warps, "occupancy": (api or 0) * warps * dev["warp_size"]
                     / dev["max_threads_per_multiprocessor"],
                     "calc_limits": dict(occ.limits) if occ else {},
                     "launch_error": launch, "launch_error_string": probe.error_string(launch)})
    return {"compute_capability": list(cc), "device": dev, "cases": rows,
            "matches": sum(r["match"] for r in rows), "total": len(rows)}
# [/gpuarch:check]


#: (name, mode, footprint in bytes, node stride in bytes, dependent loads per launch)
#: The HBM chain is scattered at random over 1 GiB, far beyond the reach of the TLBs nearest the
#: SM, so its time per load may include page-table walks as well as the DRAM access.
CHASES: tuple[tuple[str, int, int, int, int], ...] = (
    ("shared memory", 2, 32 * KIB, 4, 1 << 16),
    ("L1 (ld.ca, 16 KiB chain)", 0, 16 * KIB, 128, 1 << 16),
    ("L2 (ld.cg, 8 MiB chain)", 1, 8 * 1024 * KIB, 128, 1 << 17),
    ("HBM (ld.cg, 1 GiB chain)", 1, 1024 * 1024 * KIB, 256, 1 << 17),
)


def measure_latency(probe: Probe, chases: Sequence[tuple] = CHASES) -> list[dict]:
    """Cycles and nanoseconds per dependent load at each level (one pointer chase each)."""
    rows = []
    for name, mode, nbytes, stride, steps in chases:
        r = probe.chase(mode, nbytes, stride, steps)
        rows.append({"level": name, "mode": mode, "bytes": nbytes, "stride": stride, "steps": steps,
                     **r, "ghz": r["cycles"] / r["ns"] if r["ns"] else None})
    return rows
