"""Hardware constants with sources: the single place every page takes GPU numbers from.

Every number is a :class:`Spec`: a raw SI value (bytes, bytes per second, FLOP per second,
hertz, or a plain count), its unit, the BibTeX key of its source in ``conf/bib/hardware.bib``,
and a note. A Spec whose value the vendor has not published (or has published inconsistently)
carries ``uncertain=True`` and a note that says where the value comes from; tables mark it
with a dagger.

Conventions
-----------
* Bandwidths and FLOP rates are decimal: 1 TB/s = 10**12 B/s, 1 TFLOP/s = 10**12 FLOP/s.
* Capacities of on-chip memories and HBM are binary. The CUDA Programming Guide says so for
  its tables (KB = 1024 bytes); NVIDIA's L2 "MB" are MiB (the A100 whitepaper also prints its
  L2 as 40960 KB, and the driver reports the H100's "50 MB" as 50 MiB). For HBM the binary
  reading is a convention of this module, not something the driver settles: NVIDIA's "80GB"
  is stored as 80 GiB. The totals the driver reports lie between the decimal and the binary
  reading, so the stored capacity is slightly more than a program can allocate.
* Tensor-Core rates are DENSE. Datasheets print 2:4-structured-sparse rates with an asterisk;
  the ``sparse_*`` fields keep those printed values, and a test checks dense * 2 == sparse.
* An FMA counts as 2 FLOP.
* NVLink bandwidth is the total over both directions and all links of one GPU, as NVIDIA
  quotes it (H100: 900 GB/s = 450 GB/s each way).

This module holds the data only; :mod:`~infralens.hardware.derived` computes from it and
:mod:`~infralens.hardware.render` turns it into tables. Nothing here imports anything outside
the standard library.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

__all__ = [
    "KIB", "MIB", "GIB", "KB", "MB", "GB", "TB",
    "Spec", "SMLimits", "GPU", "CC_LIMITS", "ARCHITECTURES", "GPUS", "DTYPES",
]

# --- units -------------------------------------------------------------------------------
KIB = 1024
MIB = 1024**2
GIB = 1024**3
KB = 10**3
MB = 10**6
GB = 10**9
TB = 10**12

#: The CUDA C++ Programming Guide, the source of every per-SM limit.
_CUDA_GUIDE = "nvidiacudaguide"
#: Device queries run for this book (cuDeviceGetAttribute / cuDeviceTotalMem_v2).
_MEASURED = "infralens2026devicequery"


@dataclass(frozen=True)
class Spec:
    """One sourced number.

    ``value`` is raw SI (bytes, B/s, FLOP/s, Hz) or a count; ``source`` is a BibTeX key in
    ``conf/bib/hardware.bib``; ``uncertain`` flags values the vendor has not published as such.
    """

    value: float | int
    unit: str
    source: str
    note: str = ""
    uncertain: bool = False


@dataclass(frozen=True)
class SMLimits:
    """Per-SM limits of one compute capability (CUDA Programming Guide, technical specs)."""

    compute_capability: tuple[int, int]
    smem_per_sm_bytes: Spec
    smem_per_block_max_bytes: Spec
    registers_per_sm: Spec
    max_threads_per_sm: Spec
    max_warps_per_sm: Spec
    max_blocks_per_sm: Spec
    warp_size: Spec


def _cc(value: int, unit: str, note: str = "") -> Spec:
    return Spec(value, unit, _CUDA_GUIDE, note)


_KB_NOTE = "The guide's KB is 1024 bytes (the same table gives the 32-bit register counts as 64 K)."


def _limits(cc: tuple[int, int], smem_per_sm_kib: int, smem_per_block_kib: int) -> SMLimits:
    """One compute capability's row. Only the shared-memory sizes differ among 8.0, 9.0 and 10.0."""
    return SMLimits(
        compute_capability=cc,
        smem_per_sm_bytes=_cc(smem_per_sm_kib * KIB, "B", "Maximum configurable carve-out. " + _KB_NOTE),
        smem_per_block_max_bytes=_cc(smem_per_block_kib * KIB, "B",
                                     "Needs opt-in above 48 KiB. " + _KB_NOTE),
        registers_per_sm=_cc(64 * 1024, "32-bit registers"),
        max_threads_per_sm=_cc(2048, "threads"),
        max_warps_per_sm=_cc(64, "warps"),
        max_blocks_per_sm=_cc(32, "blocks"),
        warp_size=_cc(32, "threads"),
    )


# [hardware:cc-limits]
CC_LIMITS: Mapping[tuple[int, int], SMLimits] = MappingProxyType({
    (8, 0): _limits((8, 0), smem_per_sm_kib=164, smem_per_block_kib=163),
    (9, 0): _limits((9, 0), smem_per_sm_kib=228, smem_per_block_kib=227),
    (10, 0): _limits((10, 0), smem_per_sm_kib=228, smem_per_block_kib=227),
})
# [/hardware:cc-limits]

#: The architecture (and its chip) of each compute capability this module has GPUs of.
ARCHITECTURES: Mapping[tuple[int, int], str] = MappingProxyType({
    (8, 0): "Ampere (GA100)",
    (9, 0): "Hopper (GH100)",
    (10, 0): "Blackwell (two dies)",
})


@dataclass(frozen=True)
class GPU:
    """One GPU product (SXM variant), every number a :class:`Spec`.

    ``None`` means: not published by the vendor and not stored.
    """

    name: str
    compute_capability: tuple[int, int]
    memory_type: str
    sm_count: Spec | None
    hbm_capacity_bytes: Spec
    hbm_bandwidth_bytes_per_s: Spec
    l2_bytes: Spec | None
    dense_bf16_flops: Spec
    dense_fp16_flops: Spec
    dense_fp8_flops: Spec | None
    sparse_bf16_flops: Spec | None
    sparse_fp8_flops: Spec | None
    nvlink_bandwidth_bytes_per_s: Spec
    #: Dense BF16 Tensor-Core FLOP per clock per SM (FMA = 2 FLOP), where the whitepaper gives it.
    dense_bf16_flop_per_clock_per_sm: Spec | None = None
    #: GPU boost clock, only where the vendor prints it for the peak rates.
    boost_clock_hz: Spec | None = None
    #: Names the CUDA driver reports for exactly this product (torch.cuda.get_device_name()).
    device_names: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """The short name GPUS is keyed by: the model number, lower case ("h100")."""
        return self.name.split()[0].lower()

    @property
    def arch(self) -> str:
        """The architecture, which the compute capability names."""
        return ARCHITECTURES[self.compute_capability]

    def matches(self, device_name: str) -> bool:
        """True if ``device_name`` (as the driver reports it) is this product and form factor.

        Exact names only: "NVIDIA H100 PCIe" or "NVIDIA H200 NVL" do not match the SXM specs.
        """
        name = " ".join(device_name.split()).casefold()
        return any(name == n.casefold() for n in self.device_names)

    # Per-SM limits come from the compute capability, one table for every GPU of that capability.
    @property
    def sm_limits(self) -> SMLimits:
        return CC_LIMITS[self.compute_capability]

    @property
    def cc_str(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"

    def specs(self) -> dict[str, Spec]:
        """Every Spec of this GPU (dataclass fields and per-SM limits), by field name."""
        out = {f.name: getattr(self, f.name) for f in fields(self)
               if isinstance(getattr(self, f.name), Spec)}
        limits = self.sm_limits
        out.update({f.name: getattr(limits, f.name) for f in fields(limits)
                    if isinstance(getattr(limits, f.name), Spec)})
        return out


_NVLINK_NOTE = ("Total over both directions and all NVLink links of one GPU, as NVIDIA quotes it; "
                "each direction carries half.")
_SPARSE_NOTE = "Printed with an asterisk: 2:4 structured sparsity. Dense is half."


def _hbm(gib: int, source: str, printed_by: str, driver_total: int | None = None) -> Spec:
    """An HBM capacity the vendor prints as '<gib>GB', stored as binary GiB (see the module
    docstring), with the total the driver reports where a device query has read it."""
    note = (f"{printed_by} prints '{gib}GB'; stored as {gib} GiB (capacities are read as binary; "
            "see the module docstring).")
    if driver_total is not None:
        note += (f" The driver reports {driver_total:,} B ({driver_total / GIB:.1f} GiB) in total: "
                 f"between a decimal {gib} GB and {gib} GiB, so slightly less than the stored value "
                 "is usable.")
    return Spec(gib * GIB, "B", source, note)


# [hardware:gpus]
A100 = GPU(
    name="A100 SXM4 80GB",
    compute_capability=(8, 0),
    memory_type="HBM2e",
    device_names=("NVIDIA A100-SXM4-80GB",),
    sm_count=Spec(108, "SMs", "nvidia2020a100whitepaper"),
    hbm_capacity_bytes=_hbm(80, "nvidia2021a100datasheet", "Datasheet"),
    hbm_bandwidth_bytes_per_s=Spec(2039 * GB, "B/s", "nvidia2021a100datasheet",
                                   "SXM 80GB column: 2,039 GB/s."),
    l2_bytes=Spec(40 * MIB, "B", "nvidia2020a100whitepaper",
                  "Whitepaper prints '40 MB' and '40960 KB', i.e. 40 MiB."),
    dense_bf16_flops=Spec(312 * TB, "FLOP/s", "nvidia2021a100datasheet"),
    dense_fp16_flops=Spec(312 * TB, "FLOP/s", "nvidia2021a100datasheet"),
    dense_fp8_flops=None,  # Ampere Tensor Cores have no FP8.
    sparse_bf16_flops=Spec(624 * TB, "FLOP/s", "nvidia2021a100datasheet", _SPARSE_NOTE),
    sparse_fp8_flops=None,
    nvlink_bandwidth_bytes_per_s=Spec(600 * GB, "B/s", "nvidia2021a100datasheet",
                                      "Third-generation NVLink, 12 links. " + _NVLINK_NOTE),
    dense_bf16_flop_per_clock_per_sm=Spec(
        2048, "FLOP/clock/SM", "nvidia2020a100whitepaper",
        "256 FP16 FMA per clock per Tensor Core, 4 Tensor Cores per SM."),
    boost_clock_hz=Spec(1410 * 10**6, "Hz", "nvidia2020a100whitepaper"),
)

H100 = GPU(
    name="H100 SXM5 80GB",
    compute_capability=(9, 0),
    memory_type="HBM3",
    device_names=("NVIDIA H100 80GB HBM3",),
    sm_count=Spec(132, "SMs", "nvidia2022h100whitepaper",
                  "Full GH100 has 144 SMs; the SXM5 product enables 132."),
    hbm_capacity_bytes=_hbm(80, "nvidia2022h100datasheet", "Datasheet", driver_total=85_017_493_504),
    hbm_bandwidth_bytes_per_s=Spec(
        3.35 * TB, "B/s", "nvidia2022h100datasheet",
        "The driver reports a 5120-bit bus at 2619 MHz (DDR): 3.352e12 B/s."),
    l2_bytes=Spec(50 * MIB, "B", "nvidia2022h100whitepaper",
                  "Whitepaper prints '50 MB'; the driver reports 52,428,800 B = 50 MiB."),
    dense_bf16_flops=Spec(989.4 * TB, "FLOP/s", "nvidia2022h100whitepaper"),
    dense_fp16_flops=Spec(989.4 * TB, "FLOP/s", "nvidia2022h100whitepaper"),
    dense_fp8_flops=Spec(1978.9 * TB, "FLOP/s", "nvidia2022h100whitepaper"),
    sparse_bf16_flops=Spec(1979 * TB, "FLOP/s", "nvidia2022h100datasheet", _SPARSE_NOTE),
    sparse_fp8_flops=Spec(3958 * TB, "FLOP/s", "nvidia2022h100datasheet", _SPARSE_NOTE),
    nvlink_bandwidth_bytes_per_s=Spec(900 * GB, "B/s", "nvidia2022h100datasheet",
                                      "Fourth-generation NVLink, 18 links. " + _NVLINK_NOTE),
    dense_bf16_flop_per_clock_per_sm=Spec(
        4096, "FLOP/clock/SM", "nvidia2022h100whitepaper",
        "The whitepaper gives the H100 SM twice the A100 SM's dense MMA rate, clock for clock."),
    boost_clock_hz=None,  # Not printed consistently for the peak rates: implied_tensor_clock_hz.
)


# The H200 is an H100 SXM with more and faster memory: the same GH100 compute configuration, so
# its compute numbers are the H100's (NVIDIA's H200 page prints the same sparse rates as the H100
# SXM datasheet, and no dense ones). What differs, or has a source of its own, is replaced.
H200 = replace(
    H100,
    name="H200 SXM 141GB",
    memory_type="HBM3e",
    device_names=("NVIDIA H200",),
    sm_count=Spec(
        132, "SMs", _MEASURED,
        "Not printed on NVIDIA's H200 page. Its peak rates equal the H100 SXM's "
        "(same GH100 configuration), and cuDeviceGetAttribute on an H200 reports 132.",
        uncertain=True),
    hbm_capacity_bytes=_hbm(141, "nvidia2024h200", "NVIDIA", driver_total=150_109_880_320),
    hbm_bandwidth_bytes_per_s=Spec(
        4.8 * TB, "B/s", "nvidia2024h200",
        "The driver reports a 6016-bit bus at 3201 MHz (DDR): 4.814e12 B/s."),
    l2_bytes=Spec(
        60 * MIB, "B", _MEASURED,
        "Not printed by NVIDIA for H200. cuDeviceGetAttribute reports 62,914,560 B = 60 MiB "
        "(the H100 SXM5 reports 50 MiB).",
        uncertain=True),
    sparse_bf16_flops=Spec(1979 * TB, "FLOP/s", "nvidia2024h200", _SPARSE_NOTE),
    sparse_fp8_flops=Spec(3958 * TB, "FLOP/s", "nvidia2024h200", _SPARSE_NOTE),
    nvlink_bandwidth_bytes_per_s=Spec(900 * GB, "B/s", "nvidia2024h200", _NVLINK_NOTE),
)

B200 = GPU(
    name="B200 (HGX B200)",
    compute_capability=(10, 0),
    memory_type="HBM3e",
    device_names=("NVIDIA B200",),
    sm_count=Spec(
        148, "SMs", "vegamyhre2026update",
        "Not published by NVIDIA. Reported by cudaGetDeviceProperties on a B200 in a "
        "third-party pull request.",
        uncertain=True),
    hbm_capacity_bytes=Spec(
        180 * GIB, "B", "nvidia2024dgxb200",
        "DGX B200 lists 1,440 GB for eight GPUs, i.e. 180 per GPU; stored as 180 GiB like the "
        "other capacities."),
    hbm_bandwidth_bytes_per_s=Spec(
        7.7 * TB, "B/s", "nvidia2025hgx",
        "NVIDIA's HGX B200 specification lists 7.7 TB/s per GPU; earlier NVIDIA material "
        "(DGX B200: 64 TB/s for eight GPUs) implies 8 TB/s. A driver-reported 7680-bit bus at "
        "3996 MHz (DDR) gives 7.67e12 B/s (PyTorch ao pull request 4002).",
        uncertain=True),
    l2_bytes=Spec(
        126 * MIB + 512 * KIB, "B", "vegamyhre2026update",
        "Not published by NVIDIA. A third-party device query (cudaGetDeviceProperties) prints "
        "'L2 Cache Size: 126.50 MB'. The same query prints shared memory per SM as '228.00 KB', "
        "the CUDA guide's 228 KiB, so its units are binary: 126.5 MiB = 132,644,864 B "
        "(the H200 reports 60 MiB).",
        uncertain=True),
    dense_bf16_flops=Spec(2.25 * 10**15, "FLOP/s", "nvidia2025hgx",
                          "HGX B200 prints 36 PFLOP/s* for eight GPUs (sparse): dense per GPU "
                          "is 36/8/2."),
    dense_fp16_flops=Spec(2.25 * 10**15, "FLOP/s", "nvidia2025hgx", "Printed as 'FP16/BF16'."),
    dense_fp8_flops=Spec(4.5 * 10**15, "FLOP/s", "nvidia2025hgx",
                         "HGX B200 prints 72 PFLOP/s* FP8/FP6 for eight GPUs (sparse)."),
    sparse_bf16_flops=Spec(4.5 * 10**15, "FLOP/s", "nvidia2025hgx",
                           _SPARSE_NOTE + " Per GPU: 36 PFLOP/s / 8."),
    sparse_fp8_flops=Spec(9 * 10**15, "FLOP/s", "nvidia2025hgx",
                          _SPARSE_NOTE + " Per GPU: 72 PFLOP/s / 8."),
    nvlink_bandwidth_bytes_per_s=Spec(1800 * GB, "B/s", "nvidia2025hgx",
                                      "Fifth-generation NVLink. " + _NVLINK_NOTE),
)
# [/hardware:gpus]

GPUS: Mapping[str, GPU] = MappingProxyType({g.key: g for g in (A100, H100, H200, B200)})

DTYPES = ("bf16", "fp16", "fp8")
