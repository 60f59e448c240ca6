"""Occupancy from first principles: how many blocks of a kernel one SM holds at once, and why.

A block stays on its SM from its first instruction to its last, holding registers for all its
warps, its shared memory and one of the SM's block slots. The SM admits blocks while every one of
those resources lasts; the first to run out sets the number of resident blocks, and occupancy is
the resident warps over the most the SM can hold. Each resource is counted the way the hardware
allocates it, not the way the kernel uses it:

* **warps**: a block of T threads takes ceil(T / 32) warp slots;
* **blocks**: at most 32 resident blocks per SM on compute capability 8.0 and 9.0;
* **registers**: per warp, rounded up to the allocation unit (256 registers), and each of the
  SM's four sub-partitions holds only the warps whose registers fit in its quarter of the file;
* **shared memory**: static + dynamic + the 1 KiB the driver reserves per block, rounded up to
  128 bytes, out of the SM's shared-memory carveout;
* **barriers** (Hopper): each block's named barriers, out of two per block slot.

Per-SM limits come from :data:`infralens.hardware.CC_LIMITS`; the allocation rules below come
from NVIDIA's occupancy calculator (``cuda_occupancy.h`` in the CUDA toolkit) and the CUDA C++
Programming Guide, each :class:`~infralens.hardware.Spec` with its source. The result matches
``cudaOccupancyMaxActiveBlocksPerMultiprocessor``: the tests compare it with the calculator
header on random kernels, and a GPU cell of Chapter 1 with the runtime on real ones.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from infralens.hardware import CC_LIMITS, KIB, SMLimits, Spec
from infralens.tools.checks import require_positive

__all__ = [
    "AllocationRules", "RULES", "Kernel", "Occupancy", "occupancy", "max_registers_for",
    "max_static_smem_for", "smem_blocks_ignoring_reserve", "max_smem_ignoring_reserve",
    "carveout_bytes", "RESOURCES", "SUPPORTED",
]

_OCC = "nvidia2025occupancy"  # cuda_occupancy.h, the occupancy calculator NVIDIA ships
_GUIDE = "nvidiacudaguide"

#: Resource names, in the order the explanation lists them.
RESOURCES = ("warps", "blocks", "registers", "shared memory", "barriers")


@dataclass(frozen=True)
class AllocationRules:
    """How one compute capability allocates per-block resources (granularities and reserves)."""

    compute_capability: tuple[int, int]
    register_allocation_unit: Spec     # registers per warp are rounded up to this
    max_registers_per_thread: Spec
    registers_per_block: Spec          # a block may hold at most this many registers
    sub_partitions: Spec               # the register file is split evenly among them
    max_threads_per_block: Spec
    smem_allocation_unit: Spec         # shared memory per block is rounded up to this
    smem_reserved_per_block: Spec      # the driver's own shared memory, per block
    smem_per_block_default: Spec       # without the opt-in attribute
    smem_carveouts: Spec               # shared-memory capacities an SM can be configured with (B)
    barriers_per_block_slot: Spec      # named barriers per resident-block slot (Hopper limit)


def _s(value, unit: str, source: str, note: str = "") -> Spec:
    return Spec(value, unit, source, note)


def _rules(cc: tuple[int, int], carveouts_kib: tuple[int, ...]) -> AllocationRules:
    return AllocationRules(
        compute_capability=cc,
        register_allocation_unit=_s(256, "registers per warp", _OCC,
                                    "cudaOccRegAllocationGranularity: 256 for CC 3.x to 12.x; "
                                    "registers are allocated to warps, not to threads."),
        max_registers_per_thread=_s(255, "registers", _GUIDE,
                                    "Technical specifications: maximum 32-bit registers per thread."),
        registers_per_block=_s(64 * 1024, "registers", _GUIDE,
                               "Technical specifications: maximum 32-bit registers per block."),
        sub_partitions=_s(4, "sub-partitions", _OCC,
                          "cudaOccSubPartitionsPerMultiprocessor: 4 for CC 3.x, 5.x, 6.1, 6.2 "
                          "and 7.x to 12.x, 2 for CC 6.0 (GP100); four processing blocks per SM "
                          "since Maxwell."),
        max_threads_per_block=_s(1024, "threads", _GUIDE),
        smem_allocation_unit=_s(128, "B", _OCC,
                                "cudaOccSMemAllocationGranularity: 128 bytes for CC 8.x to 12.x."),
        smem_reserved_per_block=_s(KIB, "B", _GUIDE,
                                   "The guide's CC 8.x and 9.0 sections: 1 KB of shared memory per "
                                   "block is reserved for system use (cudaDevAttrReservedSharedMemory"
                                   "PerBlock)."),
        smem_per_block_default=_s(48 * KIB, "B", _GUIDE,
                                  "Above 48 KB a kernel must use dynamic shared memory and opt in "
                                  "with cudaFuncAttributeMaxDynamicSharedMemorySize."),
        smem_carveouts=_s(tuple(k * KIB for k in carveouts_kib), "B", _OCC,
                          "cudaOccAlignUpShmemSizeVoltaPlus; the guide lists the same capacities."),
        barriers_per_block_slot=_s(2, "barriers", _OCC,
                                   "cudaOccMaxBlocksPerSMBlockBarrierLimit: 2 x 32 block slots on "
                                   "CC 9.0; the calculator applies the limit from Hopper on."),
    )


# [gpuarch:rules]
RULES: Mapping[tuple[int, int], AllocationRules] = MappingProxyType({
    (8, 0): _rules((8, 0), (0, 8, 16, 32, 64, 100, 132, 164)),
    (9, 0): _rules((9, 0), (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
})
# [/gpuarch:rules]

#: Compute capabilities the calculator covers (per-SM limits and allocation rules both known).
SUPPORTED = tuple(cc for cc in RULES if cc in CC_LIMITS)


@dataclass(frozen=True)
class Kernel:
    """What a kernel asks of an SM, per block (``cudaFuncGetAttributes`` plus the launch).

    ``max_dynamic_smem_bytes`` is the kernel's ``cudaFuncAttributeMaxDynamicSharedMemorySize``:
    ``None`` keeps the default (48 KiB less the static shared memory); a larger value is the
    opt-in that lets one block use up to the per-block maximum.
    """

    threads_per_block: int
    registers_per_thread: int
    static_smem_bytes: int = 0
    dynamic_smem_bytes: int = 0
    max_dynamic_smem_bytes: int | None = None
    barriers: int = 1
    name: str = ""

    def __post_init__(self) -> None:
        for f in ("threads_per_block", "registers_per_thread", "static_smem_bytes",
                  "dynamic_smem_bytes", "barriers"):
            if getattr(self, f) < 0:
                raise ValueError(f"{f} must be >= 0, got {getattr(self, f)}")
        if self.threads_per_block == 0:
            raise ValueError("threads_per_block must be >= 1")


@dataclass(frozen=True)
class Occupancy:
    """The answer, with every intermediate quantity, so the derivation can be printed."""

    kernel: Kernel
    compute_capability: tuple[int, int]
    blocks_per_sm: int
    limits: Mapping[str, int]          # resource -> blocks it alone would allow
    limiters: tuple[str, ...]          # the resources whose limit is the answer
    warps_per_block: int
    max_warps_per_sm: int
    registers_per_warp: int            # allocated, after rounding
    smem_per_block: int                # allocated: static + reserved + dynamic, rounded
    smem_per_sm: int                   # the carveout the count used
    invalid: str = ""                  # why no block can launch at all, if so
    notes: tuple[str, ...] = field(default=())

    @property
    def active_warps(self) -> int:
        return self.blocks_per_sm * self.warps_per_block

    @property
    def occupancy(self) -> float:
        """Resident warps over the SM's maximum (the theoretical occupancy of Nsight Compute)."""
        return self.active_warps / self.max_warps_per_sm

    @property
    def limiter(self) -> str:
        """The binding resource; ties are listed in :attr:`limiters`."""
        return self.limiters[0] if self.limiters else ""

    def explain(self) -> str:
        """The derivation, one resource per line."""
        k, cc = self.kernel, f"{self.compute_capability[0]}.{self.compute_capability[1]}"
        head = (f"{k.name or 'kernel'} on CC {cc}: {k.threads_per_block} threads "
                f"({self.warps_per_block} warps), {k.registers_per_thread} registers/thread, "
                f"{k.static_smem_bytes + k.dynamic_smem_bytes:,} B shared memory per block")
        lines = [head]
        why = {
            "warps": f"{self.max_warps_per_sm} warp slots / {self.warps_per_block} per block",
            "blocks": "block slots per SM",
            "registers": (f"{self.registers_per_warp:,} registers per warp (allocated), "
                          f"whole warps per sub-partition"),
            "shared memory": (f"{self.smem_per_sm:,} B carveout / {self.smem_per_block:,} B per "
                              f"block (allocated)"),
            "barriers": f"{k.barriers} barrier(s) per block",
        }
        for name in RESOURCES:
            if name in self.limits:
                mark = "  <- limit" if name in self.limiters else ""
                lines.append(f"  {name:<14}{self.limits[name]:>5} blocks   {why[name]}{mark}")
        if self.invalid:
            lines.append(f"  cannot launch: {self.invalid}")
        lines.append(f"  = {self.blocks_per_sm} blocks, {self.active_warps} of "
                     f"{self.max_warps_per_sm} warps, occupancy {self.occupancy:.1%}")
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def carveout_bytes(requested: int, cc: tuple[int, int] = (9, 0)) -> int:
    """The smallest supported shared-memory capacity of an SM that holds ``requested`` bytes."""
    for size in RULES[cc].smem_carveouts.value:
        if requested <= size:
            return size
    raise ValueError(f"{requested} B is more shared memory than an SM of CC {cc} has")


def _limits(cc: tuple[int, int]) -> tuple[SMLimits, AllocationRules]:
    if cc not in RULES or cc not in CC_LIMITS:
        raise ValueError(f"compute capability {cc} not covered; supported: {SUPPORTED}")
    return CC_LIMITS[cc], RULES[cc]


# [gpuarch:occupancy]
def occupancy(kernel: Kernel, cc: tuple[int, int] = (9, 0), *,
              carveout_percent: int | None = None) -> Occupancy:
    """Resident blocks per SM of ``kernel`` on compute capability ``cc``.

    ``carveout_percent`` is the kernel's preferred shared-memory carveout
    (``cudaFuncAttributePreferredSharedMemoryCarveout``), in percent of the maximum; ``None``
    means no preference, and the full shared memory of the SM is available.
    """
    sm, rules = _limits(cc)
    warp = sm.warp_size.value
    warps = -(-kernel.threads_per_block // warp)                   # ceil(T / 32)
    max_warps = sm.max_warps_per_sm.value
    limits: dict[str, int] = {}
    invalid = ""

    # Warps and blocks: slots in the SM's scheduler tables.
    limits["warps"] = max_warps // warps
    limits["blocks"] = sm.max_blocks_per_sm.value
    if kernel.threads_per_block > rules.max_threads_per_block.value:
        invalid = f"{kernel.threads_per_block} threads > {rules.max_threads_per_block.value} per block"

    # Registers: allocated per warp in units of 256, and a warp's registers must sit in one of
    # the four sub-partitions, each holding a quarter of the register file.
    r = kernel.registers_per_thread
    per_warp = _round_up(r * warp, rules.register_allocation_unit.value)
    parts = rules.sub_partitions.value
    if r > rules.max_registers_per_thread.value:
        limits["registers"] = 0
        invalid = invalid or f"{r} registers > {rules.max_registers_per_thread.value} per thread"
    elif per_warp * _round_up(warps, parts) > rules.registers_per_block.value:
        limits["registers"] = 0  # the per-block check counts warps in multiples of 4
        invalid = invalid or (f"{per_warp:,} registers x {_round_up(warps, parts)} warps > "
                              f"{rules.registers_per_block.value:,} per block")
    elif per_warp:
        warps_per_part = (sm.registers_per_sm.value // parts) // per_warp
        limits["registers"] = (warps_per_part * parts) // warps

    # Shared memory: static + reserved + dynamic, rounded to 128 B, out of the carveout.
    reserved = rules.smem_reserved_per_block.value
    default_dyn = rules.smem_per_block_default.value - kernel.static_smem_bytes
    max_dyn = default_dyn if kernel.max_dynamic_smem_bytes is None else kernel.max_dynamic_smem_bytes
    if kernel.static_smem_bytes + max_dyn > sm.smem_per_block_max_bytes.value:
        raise ValueError(f"static + max dynamic shared memory exceeds the opt-in maximum of "
                         f"{sm.smem_per_block_max_bytes.value:,} B per block")
    per_block = _round_up(kernel.static_smem_bytes + reserved + kernel.dynamic_smem_bytes,
                          rules.smem_allocation_unit.value)
    sm_smem = sm.smem_per_sm_bytes.value
    notes: list[str] = []
    if carveout_percent is not None and carveout_percent >= 0:
        preferred = carveout_bytes(carveout_percent * sm_smem // 100, cc)
        # A preference smaller than one block is overridden: the driver grows the carveout.
        sm_smem = preferred if preferred >= per_block else carveout_bytes(per_block, cc)
        notes.append(f"carveout {carveout_percent}% -> {sm_smem // KIB} KiB of shared memory")
    if kernel.dynamic_smem_bytes > max_dyn:
        limits["shared memory"] = 0
        invalid = invalid or (f"{kernel.dynamic_smem_bytes:,} B dynamic > the kernel's maximum "
                              f"of {max_dyn:,} B (opt in to raise it)")
    else:
        limits["shared memory"] = sm_smem // per_block

    # Barriers (Hopper): two per block slot, shared by the resident blocks.
    if cc >= (9, 0) and kernel.barriers > 0:
        slots = rules.barriers_per_block_slot.value * sm.max_blocks_per_sm.value
        limits["barriers"] = slots // kernel.barriers

    blocks = 0 if invalid else min(limits.values())
    limiters = tuple(name for name in RESOURCES if limits.get(name) == blocks)
    return Occupancy(kernel, cc, blocks, MappingProxyType(limits), limiters, warps, max_warps,
                     per_warp, per_block, sm_smem, invalid, tuple(notes))
# [/gpuarch:occupancy]


def max_registers_for(threads_per_block: int, blocks_per_sm: int, cc: tuple[int, int] = (9, 0),
                      **kernel_args) -> int:
    """The most registers per thread that still lets ``blocks_per_sm`` blocks reside.

    This is the budget ``__launch_bounds__(threads_per_block, blocks_per_sm)`` gives the compiler;
    returns 0 if no register count achieves it (another resource is the limit).
    """
    _, rules = _limits(cc)
    for r in range(rules.max_registers_per_thread.value, 0, -1):
        k = Kernel(threads_per_block, r, **kernel_args)
        if occupancy(k, cc).blocks_per_sm >= blocks_per_sm:
            return r
    return 0


def max_static_smem_for(threads_per_block: int, blocks_per_sm: int, registers_per_thread: int,
                        cc: tuple[int, int] = (9, 0)) -> int:
    """The largest static shared memory per block with which ``blocks_per_sm`` blocks still reside.

    Tiles are tried in steps of the allocation unit up to the 48 KiB a static allocation may use
    (more needs dynamic shared memory and the opt-in); returns 0 if no tile achieves it.
    """
    require_positive(blocks_per_sm=blocks_per_sm)
    _, rules = _limits(cc)
    unit = rules.smem_allocation_unit.value
    for tile in range(rules.smem_per_block_default.value // unit * unit, 0, -unit):
        k = Kernel(threads_per_block, registers_per_thread, static_smem_bytes=tile)
        if occupancy(k, cc).blocks_per_sm >= blocks_per_sm:
            return tile
    return 0


def smem_blocks_ignoring_reserve(smem_per_block: int, cc: tuple[int, int] = (9, 0)) -> int:
    """Blocks per SM that shared memory alone allows when the per-block reserve is forgotten: the
    SM's shared memory over the block's, rounded up to the allocation unit. The common mistake
    that :func:`occupancy` does not make; a page sets the two side by side."""
    if smem_per_block < 1:
        raise ValueError(f"smem_per_block must be >= 1 byte, got {smem_per_block}")
    sm, rules = _limits(cc)
    return sm.smem_per_sm_bytes.value // _round_up(smem_per_block, rules.smem_allocation_unit.value)


def max_smem_ignoring_reserve(blocks_per_sm: int, cc: tuple[int, int] = (9, 0)) -> int:
    """The most shared memory per block for ``blocks_per_sm`` blocks when the per-block reserve is
    forgotten: the SM's shared memory divided among the blocks, rounded down to the allocation
    unit (compare :func:`max_static_smem_for`)."""
    if blocks_per_sm < 1:
        raise ValueError(f"blocks_per_sm must be >= 1, got {blocks_per_sm}")
    sm, rules = _limits(cc)
    unit = rules.smem_allocation_unit.value
    return sm.smem_per_sm_bytes.value // blocks_per_sm // unit * unit


def sweep_registers(threads_per_block: int, registers: Iterable[int],
                    cc: tuple[int, int] = (9, 0)) -> list[tuple[int, float]]:
    """(registers per thread, occupancy) for a range of register counts."""
    return [(r, occupancy(Kernel(threads_per_block, r), cc).occupancy) for r in registers]


def sweep_smem(threads_per_block: int, smem_bytes: Iterable[int], registers_per_thread: int = 32,
               cc: tuple[int, int] = (9, 0)) -> list[tuple[int, float]]:
    """(dynamic shared memory per block, occupancy), with the opt-in raised to the maximum."""
    sm, _ = _limits(cc)
    out = []
    for b in smem_bytes:
        k = Kernel(threads_per_block, registers_per_thread, dynamic_smem_bytes=b,
                   max_dynamic_smem_bytes=sm.smem_per_block_max_bytes.value)
        out.append((b, occupancy(k, cc).occupancy))
    return out
