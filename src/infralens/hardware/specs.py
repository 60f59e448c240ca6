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
  ``dense_*`` fields are Tensor-Core rates; ``nontensor_*`` fields are the rates of the FP32 and
  FP64 units outside the Tensor Cores. INT8 rates are in integer operations per second (OP/s).
* An FMA counts as 2 FLOP (2 OP for INT8).
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
    "Spec", "SMLimits", "GPU", "CC_LIMITS", "ARCHITECTURES", "GPUS", "VARIANTS", "ALL_GPUS",
    "DTYPES",
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
    """One GPU product, every number a :class:`Spec`.

    :data:`GPUS` holds the SXM modules of HGX and DGX servers; :data:`VARIANTS` other form
    factors and packagings of the same chips. ``None`` means: not published by the vendor and
    not stored.
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
    # Rates of the other precisions, where the vendor prints them (see the module docstring).
    dense_tf32_flops: Spec | None = None
    dense_int8_ops: Spec | None = None
    #: FP64 on the Tensor Cores (DMMA); no sparse rate exists.
    dense_fp64_flops: Spec | None = None
    #: FP32 and FP64 on the units outside the Tensor Cores (FFMA, DFMA).
    nontensor_fp32_flops: Spec | None = None
    nontensor_fp64_flops: Spec | None = None
    #: The key of :data:`ALL_GPUS` where the model number alone is ambiguous ("h100_pcie").
    slug: str = ""

    @property
    def key(self) -> str:
        """The short name GPUS is keyed by: the model number, lower case ("h100"), unless a
        slug tells two form factors of one model apart ("h100_pcie")."""
        return self.slug or self.name.split()[0].lower()

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
    dense_tf32_flops=Spec(494.7 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                          "Table 3 prints 494.7/989.4 (dense/sparse)."),
    dense_int8_ops=Spec(1978.9 * TB, "OP/s", "nvidia2022h100whitepaper",
                        "Table 3 prints 1978.9/3957.8 TOPS (dense/sparse), as for FP8."),
    dense_fp64_flops=Spec(66.9 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                          "FP64 Tensor Core; Table 3 computes it at the 1,980 MHz boost clock, "
                          "not the 1,830 MHz of the other Tensor-Core rates."),
    nontensor_fp32_flops=Spec(66.9 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                              "132 SMs x 128 FP32 units x 2 FLOP x 1.98 GHz; the datasheet "
                              "prints 67."),
    nontensor_fp64_flops=Spec(33.5 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                              "132 SMs x 64 FP64 units x 2 FLOP x 1.98 GHz; the datasheet "
                              "prints 34."),
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


# [hardware:variants]
# Other form factors of the same chips. The H100 PCIe and the H100 NVL are GH100s on PCIe cards
# (pairs joined by NVLink bridges), with fewer SMs or lower clocks than the SXM5 module; the GB200
# is the Blackwell GPU of a Grace Blackwell superchip (one Grace CPU, two GPUs), stored per GPU.
def _h100_card(form: str, gib: int, memory_type: str, **specs: Spec | None) -> GPU:
    """An H100 of one PCIe form factor (``"PCIe"``, ``"NVL"``): a GH100 of compute capability 9.0,
    its name, key and the name the driver reports all made of the form factor."""
    return GPU(name=f"H100 {form} {gib}GB", slug=f"h100_{form.lower()}", compute_capability=(9, 0),
               memory_type=memory_type, device_names=(f"NVIDIA H100 {form}",), **specs)


H100_PCIE = _h100_card(
    "PCIe", 80, "HBM2e",
    sm_count=Spec(114, "SMs", "nvidia2022h100whitepaper", "Table 3, H100 PCIe column: 57 TPCs."),
    hbm_capacity_bytes=_hbm(80, "nvidia2022h100datasheet", "Datasheet (H100 PCIe column)"),
    hbm_bandwidth_bytes_per_s=Spec(
        2.0 * TB, "B/s", "nvidia2022h100datasheet",
        "The datasheet and NVIDIA's H100 PCIe product brief print 2 TB/s (2,000 GB/s); the "
        "whitepaper's Table 3 prints 2,039 GB/s, in a row it marks as not finalized."),
    l2_bytes=Spec(50 * MIB, "B", "nvidia2022h100whitepaper", "Table 3 prints '50 MB', as for SXM5."),
    dense_bf16_flops=Spec(756 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                          "Table 3 prints 756/1513 (dense/sparse)."),
    dense_fp16_flops=Spec(756 * TB, "FLOP/s", "nvidia2022h100whitepaper"),
    dense_fp8_flops=Spec(1513 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                         "Table 3 prints 1513/3026 (dense/sparse)."),
    sparse_bf16_flops=Spec(1513 * TB, "FLOP/s", "nvidia2022h100datasheet", _SPARSE_NOTE),
    sparse_fp8_flops=Spec(3026 * TB, "FLOP/s", "nvidia2022h100datasheet", _SPARSE_NOTE),
    nvlink_bandwidth_bytes_per_s=Spec(
        600 * GB, "B/s", "nvidia2022h100datasheet",
        "Through three NVLink bridges that join two adjacent cards; no NVSwitch. " + _NVLINK_NOTE),
    dense_bf16_flop_per_clock_per_sm=Spec(
        4096, "FLOP/clock/SM", "nvidia2022h100whitepaper", "The same SM as the SXM5's."),
    boost_clock_hz=Spec(
        1755 * 10**6, "Hz", "nvidia2022h100whitepaper",
        "Table 3: 1,755 MHz for the FP32 and FP64 rates and FP64 on the Tensor Cores (114 SMs x "
        "256 FLOP x 1.755 GHz = 51.2 TFLOP/s), 1,620 MHz for the TF32, FP16/BF16, FP8 and INT8 "
        "Tensor-Core rates."),
    dense_tf32_flops=Spec(378 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                          "Table 3 prints 378/756 (dense/sparse)."),
    dense_int8_ops=Spec(1513 * TB, "OP/s", "nvidia2022h100whitepaper",
                        "Table 3 prints 1513/3026 TOPS (dense/sparse)."),
    dense_fp64_flops=Spec(51.2 * TB, "FLOP/s", "nvidia2022h100whitepaper"),
    nontensor_fp32_flops=Spec(51.2 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                              "The datasheet prints 51."),
    nontensor_fp64_flops=Spec(25.6 * TB, "FLOP/s", "nvidia2022h100whitepaper",
                              "The datasheet prints 26."),
)

_NVL_NOTE = "The datasheet prints only the rate with sparsity ({}*); dense is half."

H100_NVL = _h100_card(
    "NVL", 94, "HBM3",
    sm_count=None,  # Not in NVIDIA's H100 NVL datasheet.
    hbm_capacity_bytes=_hbm(94, "nvidia2024h100datasheet", "The datasheet"),
    hbm_bandwidth_bytes_per_s=Spec(3.9 * TB, "B/s", "nvidia2024h100datasheet"),
    l2_bytes=None,  # Not in the datasheet.
    dense_bf16_flops=Spec(835.5 * TB, "FLOP/s", "nvidia2024h100datasheet",
                          _NVL_NOTE.format("1,671")),
    dense_fp16_flops=Spec(835.5 * TB, "FLOP/s", "nvidia2024h100datasheet",
                          _NVL_NOTE.format("1,671")),
    dense_fp8_flops=Spec(1670.5 * TB, "FLOP/s", "nvidia2024h100datasheet",
                         _NVL_NOTE.format("3,341")),
    sparse_bf16_flops=Spec(1671 * TB, "FLOP/s", "nvidia2024h100datasheet", _SPARSE_NOTE),
    sparse_fp8_flops=Spec(3341 * TB, "FLOP/s", "nvidia2024h100datasheet", _SPARSE_NOTE),
    nvlink_bandwidth_bytes_per_s=Spec(
        600 * GB, "B/s", "nvidia2024h100datasheet",
        "NVLink bridges between cards; no NVSwitch. " + _NVLINK_NOTE),
    dense_tf32_flops=Spec(417.5 * TB, "FLOP/s", "nvidia2024h100datasheet",
                          _NVL_NOTE.format("835")),
    dense_int8_ops=Spec(1670.5 * TB, "OP/s", "nvidia2024h100datasheet",
                        _NVL_NOTE.format("3,341 TOPS")),
    dense_fp64_flops=Spec(60 * TB, "FLOP/s", "nvidia2024h100datasheet"),
    nontensor_fp32_flops=Spec(60 * TB, "FLOP/s", "nvidia2024h100datasheet"),
    nontensor_fp64_flops=Spec(30 * TB, "FLOP/s", "nvidia2024h100datasheet"),
)

_GB200 = "nvidia2024gb200nvl72"
_SUPERCHIP_NOTE = ("NVIDIA prints {} per GB200 superchip (one Grace CPU, two GPUs), with sparsity "
                   "(its footnote: dense is one half); per GPU and dense: {}. NVIDIA rates a GB200 "
                   "GPU above an HGX B200 GPU.")

GB200 = GPU(
    name="GB200 (per GPU)",
    compute_capability=(10, 0),
    memory_type="HBM3e",
    device_names=("NVIDIA GB200",),
    sm_count=None,  # Not published.
    hbm_capacity_bytes=Spec(
        186 * GIB, "B", _GB200,
        "NVIDIA's GB200 NVL72 page prints 372 GB per superchip (13.4 TB for 72 GPUs); its earlier "
        "version printed 384 GB (13.5 TB). Per GPU: 186 GB, stored as 186 GiB like the other "
        "capacities.",
        uncertain=True),
    hbm_bandwidth_bytes_per_s=Spec(
        8 * TB, "B/s", _GB200, "16 TB/s per superchip, 576 TB/s for 72 GPUs: 8 TB/s per GPU."),
    l2_bytes=None,  # Not published.
    dense_bf16_flops=Spec(2.5 * 10**15, "FLOP/s", _GB200,
                          _SUPERCHIP_NOTE.format("10 PFLOPS FP16/BF16", "10 / 2 / 2")),
    dense_fp16_flops=Spec(2.5 * 10**15, "FLOP/s", _GB200, "Printed as 'FP16/BF16'."),
    dense_fp8_flops=Spec(5 * 10**15, "FLOP/s", _GB200,
                         _SUPERCHIP_NOTE.format("20 PFLOPS FP8/FP6", "20 / 2 / 2")),
    sparse_bf16_flops=Spec(5 * 10**15, "FLOP/s", _GB200, _SPARSE_NOTE + " Per GPU: 10 / 2."),
    sparse_fp8_flops=Spec(10 * 10**15, "FLOP/s", _GB200, _SPARSE_NOTE + " Per GPU: 20 / 2."),
    nvlink_bandwidth_bytes_per_s=Spec(
        1800 * GB, "B/s", _GB200,
        "3.6 TB/s per superchip; fifth-generation NVLink through the NVL72's NVLink switches. "
        + _NVLINK_NOTE),
    dense_tf32_flops=Spec(1.25 * 10**15, "FLOP/s", _GB200,
                          _SUPERCHIP_NOTE.format("5 PFLOPS TF32", "5 / 2 / 2")),
    dense_int8_ops=Spec(5 * 10**15, "OP/s", _GB200,
                        _SUPERCHIP_NOTE.format("20 POPS INT8", "20 / 2 / 2")),
    nontensor_fp32_flops=Spec(80 * TB, "FLOP/s", _GB200, "160 TFLOPS per superchip."),
)
# [/hardware:variants]

#: Other form factors and packagings, keyed like :data:`GPUS`.
VARIANTS: Mapping[str, GPU] = MappingProxyType({g.key: g for g in (H100_PCIE, H100_NVL, GB200)})
#: :data:`GPUS` and :data:`VARIANTS` together.
ALL_GPUS: Mapping[str, GPU] = MappingProxyType({**GPUS, **VARIANTS})

DTYPES = ("bf16", "fp16", "fp8")
