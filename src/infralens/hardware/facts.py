"""Architecture facts finer than a product sheet, each with its source.

:mod:`~infralens.hardware.specs` keeps the product numbers every page uses (SMs, HBM, L2,
Tensor-Core rates, NVLink, per-SM limits). This module keeps the finer-grained facts: the
inside of an SM, memory-system granularities, interconnect link counts, cluster limits, the
Ada and Blackwell differences and an AMD MI300X contrast. Each is a
:class:`~infralens.hardware.Spec` with the BibTeX key of its source (``conf/bib/hardware.bib``
or ``conf/bib/ch01.bib``); values the vendor states loosely carry ``uncertain=True`` and say why.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from infralens.hardware.specs import GB, KIB, MIB, TB, Spec

__all__ = ["FACTS", "fact", "uncertain_facts"]

_GUIDE = "nvidiacudaguide"
_H100_WP = "nvidia2022h100whitepaper"
_A100_WP = "nvidia2020a100whitepaper"
_PTX = "nvidia2025ptx"
_BEST = "nvidia2025bestpractices"
_MI300X = "amd2023mi300x"
_CDNA3 = "amd2023cdna3"

# [hardware:facts]
FACTS: Mapping[str, Spec] = MappingProxyType({
    # Inside the SM (Hopper and Ampere): four processing blocks ("sub-partitions"), each with its
    # own warp scheduler, a quarter of the register file and one Tensor Core.
    "sm_sub_partitions": Spec(4, "per SM", _H100_WP,
                              "Four processing blocks per SM, one warp scheduler and one Tensor Core "
                              "each (also A100)."),
    "h100_fp32_lanes_per_sm": Spec(128, "per SM", _H100_WP, "32 FP32 units per processing block."),
    "a100_fp32_lanes_per_sm": Spec(64, "per SM", _A100_WP),
    "sfu_results_per_clock_per_sm": Spec(
        16, "results/clock/SM", _GUIDE,
        "Special-function units (SASS MUFU): 32-bit reciprocal, reciprocal square root, base-2 "
        "logarithm and exponential (__log2f, exp2f), sine and cosine. Compute capabilities 8.0 and "
        "9.0 alike, in the guide's table of arithmetic-instruction throughput (results per clock "
        "per multiprocessor), where 32-bit add, multiply and multiply-add give 64 (8.0) and 128 "
        "(9.0). On an H100 SXM5, 132 SMs x 16 x 1.83 GHz = 3.9e12 per second, the rate "
        "FlashAttention-3 (shah2024flashattention3) quotes."),
    "h100_boost_clock_hz": Spec(
        1980 * 10**6, "Hz", _H100_WP,
        "H100 SXM5 maximum boost clock for everything except the reduced-precision Tensor-Core "
        "rates: the FP32 and FP64 (non-Tensor) peaks and FP64 on the Tensor Cores assume it: "
        "132 SMs x 128 FP32 lanes x 2 FLOP x 1.98 GHz = 66.9 TFLOP/s, which the datasheet prints "
        "as 67, and FP64 Tensor is 132 x 256 FLOP x 1.98 GHz = 66.9 TFLOP/s too. The "
        "whitepaper's Table 3 gives the SXM5 a second, lower maximum boost clock, 1,830 MHz, which "
        "the TF32, FP16/BF16, FP8 and INT8 Tensor-Core rates assume "
        "(derived.implied_tensor_clock_hz recovers it from those rates)."),
    "tensor_cores_per_sm": Spec(4, "per SM", _H100_WP, "A100 and H100 alike."),
    "h100_l1_smem_per_sm_bytes": Spec(256 * KIB, "B", _H100_WP,
                                      "Combined L1 data cache and shared memory per SM."),
    "a100_l1_smem_per_sm_bytes": Spec(192 * KIB, "B", _A100_WP),
    "max_warps_per_block": Spec(32, "warps", _GUIDE, "1024 threads per block."),
    "l2_partitions": Spec(2, "partitions", _A100_WP,
                          "The L2 cache is divided into two partitions, each caching data for the "
                          "SMs of the GPCs directly connected to it (A100; the H100 keeps the "
                          "partitioned L2 of nvidia2022h100whitepaper)."),
    # Memory-system granularities.
    "smem_banks": Spec(32, "banks", _GUIDE, "Successive 32-bit words map to successive banks."),
    "smem_bank_width_bytes": Spec(4, "B", _GUIDE),
    "sector_bytes": Spec(32, "B", _BEST, "Global memory is accessed in 32-byte sectors."),
    "cache_line_bytes": Spec(128, "B", _GUIDE, "L1 and L2 lines are 128 bytes: four sectors."),
    "h100_pcie_bytes_per_s": Spec(128 * GB, "B/s", "nvidia2022h100datasheet",
                                  "PCIe Gen5, both directions together, as the datasheet prints it."),
    # Tensor-Core instructions.
    "warpgroup_warps": Spec(4, "warps", _PTX, "wgmma: four contiguous warps, 128 threads."),
    # Clusters (Hopper).
    "cluster_max_portable": Spec(8, "blocks", _GUIDE, "Portable maximum thread blocks per cluster."),
    "cluster_max_nonportable_h100": Spec(16, "blocks", _GUIDE,
                                         "With cudaFuncAttributeNonPortableClusterSizeAllowed."),
    "tma_max_dims": Spec(5, "dimensions", _PTX, "cp.async.bulk.tensor handles 1-D to 5-D tiles."),
    # Interconnect.
    "a100_nvlink_links": Spec(12, "links", _A100_WP, "Third-generation NVLink."),
    "h100_nvlink_links": Spec(18, "links", _H100_WP, "Fourth-generation NVLink."),
    "b200_nvlink_links": Spec(18, "links", "nvidia2024blackwell", "Fifth-generation NVLink."),
    "hgx_gpus": Spec(8, "GPUs", "nvidia2025hgx", "HGX H100, H200 and B200 boards hold eight GPUs."),
    # Scale-out: one compute-fabric adapter per GPU in NVIDIA's DGX servers (line rates, each way).
    "dgx_a100_compute_nics": Spec(8, "adapters", "nvidia2021dgxa100guide",
                                  "Eight HDR InfiniBand adapters for the compute fabric, plus two for "
                                  "storage: one per GPU."),
    "dgx_a100_nic_bytes_per_s": Spec(200 * GB // 8, "B/s", "nvidia2021dgxa100guide",
                                     "HDR InfiniBand, 200 Gb/s each way per adapter."),
    "dgx_h100_compute_nics": Spec(8, "adapters", "nvidia2023dgxh100guide",
                                  "Eight single-port ConnectX-7 adapters in four OSFP cages: one per GPU."),
    "dgx_h100_nic_bytes_per_s": Spec(400 * GB // 8, "B/s", "nvidia2023dgxh100guide",
                                     "NDR InfiniBand, 400 Gb/s each way per adapter."),
    "nvl72_gpus": Spec(72, "GPUs", "nvidia2024gb200nvl72",
                       "One NVLink domain: 72 Blackwell GPUs and 36 Grace CPUs."),
    "nvl72_nvlink_bytes_per_s": Spec(130 * TB, "B/s", "nvidia2024gb200nvl72",
                                     "Printed as 130 TB/s of total NVLink bandwidth (both directions)."),
    # Ada (compute capability 8.9): per-SM limits that differ from the data-center parts.
    "ada_max_threads_per_sm": Spec(1536, "threads", _GUIDE, "Compute capability 8.9: 48 warps."),
    "ada_max_blocks_per_sm": Spec(24, "blocks", _GUIDE, "Compute capability 8.9."),
    "ada_smem_per_sm_bytes": Spec(100 * KIB, "B", _GUIDE, "Compute capability 8.9 (99 KB per block)."),
    # Blackwell (B200).
    "b200_die_to_die_bytes_per_s": Spec(10 * TB, "B/s", "nvidia2024blackwell",
                                        "NV-HBI between the two dies of one B200."),
    "blackwell_tmem_per_sm_bytes": Spec(256 * KIB, "B", _PTX,
                                        "Tensor Memory, where tcgen05 MMAs accumulate: 128 lanes x "
                                        "512 columns of 32-bit cells per SM. A CTA allocates columns "
                                        "(a power of two, 32 to 512) with tcgen05.alloc."),
    # AMD MI300X (CDNA 3), from AMD's data sheet and white paper.
    "mi300x_cus": Spec(304, "CUs", _MI300X),
    "mi300x_wavefront": Spec(64, "threads", _CDNA3, "CDNA executes wave64 wavefronts."),
    "mi300x_xcds": Spec(8, "dies", _CDNA3, "Eight accelerator complex dies (XCDs), 38 CUs each."),
    "mi300x_lds_per_cu_bytes": Spec(64 * KIB, "B", _CDNA3, "Local data share per CU."),
    "mi300x_hbm_bytes": Spec(192 * 2**30, "B", _MI300X,
                             "Printed as 192 GB; stored as GiB like the NVIDIA capacities."),
    "mi300x_hbm_bytes_per_s": Spec(5.3 * TB, "B/s", _MI300X, "Peak theoretical HBM3 bandwidth."),
    "mi300x_infinity_cache_bytes": Spec(256 * MIB, "B", _MI300X, "AMD Infinity Cache (last level)."),
    "mi300x_dense_bf16_flops": Spec(1307.4e12, "FLOP/s", _MI300X,
                                    "Peak theoretical, dense (the sheet also prints 2:4-sparse rates)."),
    "mi300x_dense_fp8_flops": Spec(2614.9e12, "FLOP/s", _MI300X, "Peak theoretical, dense."),
    "mi300x_if_links": Spec(7, "links", _MI300X, "AMD Infinity Fabric links to the other seven GPUs."),
    "mi300x_if_link_bytes_per_s": Spec(
        128 * GB, "B/s", _MI300X,
        "Peak per link, both directions together, as the data sheet prints it (like NVLink's "
        "figures): the CDNA 3 white paper (amd2023cdna3) makes each link 16 lanes at up to 32 Gb/s, "
        "64 GB/s each way, and prints 896 GB/s of peak aggregate bandwidth for the seven links, "
        "7 x 128 GB/s."),
    "mi300x_if_link_lanes": Spec(16, "lanes", _CDNA3, "Seven x16 Infinity Fabric links per MI300X."),
    "mi300x_if_lane_bits_per_s": Spec(32 * 10**9, "bit/s", _CDNA3,
                                      "Infinity Fabric links of CDNA 3 operate at up to 32 Gb/s per lane."),
    # Instruction throughput of compute capability 9.0 (H100, H200), results per clock per SM, from
    # the guide's table of native arithmetic instructions; FP32 is h100_fp32_lanes_per_sm and the
    # special functions sfu_results_per_clock_per_sm above. A warp-instruction is 32 results (64 for
    # a half2 instruction).
    "cc90_fp16_results_per_clock_per_sm": Spec(
        256, "results/clock/SM", _GUIDE,
        "16-bit floating-point add, multiply and multiply-add (a half2 instruction gives two)."),
    "half2_results_per_lane": Spec(
        2, "results per thread", _GUIDE,
        "A half2 instruction (__hadd2, __hmul2, __hfma2; SASS HADD2, HMUL2, HFMA2) operates on two "
        "16-bit values packed in one 32-bit register, and the guide's 16-bit throughput counts "
        "each as a result: one half2 warp-instruction gives 2 x 32 = 64 results."),
    "cc90_fp64_results_per_clock_per_sm": Spec(
        64, "results/clock/SM", _GUIDE, "64-bit floating-point add, multiply and multiply-add."),
    "cc90_int32_results_per_clock_per_sm": Spec(
        64, "results/clock/SM", _GUIDE,
        "32-bit integer add and subtract, bitwise AND, OR and XOR, shift, compare, min and max."),
    "cc90_shuffle_results_per_clock_per_sm": Spec(32, "results/clock/SM", _GUIDE, "Warp shuffle."),
    "cc90_conversion_results_per_clock_per_sm": Spec(
        16, "results/clock/SM", _GUIDE,
        "Type conversions other than 8- and 16-bit integers to 32-bit types (int to float, float "
        "to int, and to or from 64-bit types)."),
    # Dependent-issue latency: cycles from issuing an FP32 FMA to issuing one that uses its result.
    "ffma_dependent_latency_cycles": Spec(
        4, "cycles", "jia2018dissecting",
        "Measured with chains of dependent FFMA instructions on Volta (V100); the CUDA guide gives "
        "'typically 4 clock cycles' for most arithmetic instructions on compute capability 7.x "
        "and no figure for 9.0. For the H100 it is an estimate; Chapter 1's FFMA probe bounds it "
        "from above on the lent GPU.",
        uncertain=True),
    # wgmma.mma_async (Hopper): M is 64 for every type; K depends on the input type, so that
    # every instruction reads 32 bytes of K per row of A and per column of B.
    "wgmma_m": Spec(64, "rows", _PTX, "Every wgmma.mma_async shape has M = 64: 16 rows per warp."),
    "wgmma_n_max": Spec(256, "columns", _PTX, "N runs up to 256 (.m64n256k16 for 16-bit inputs)."),
    "wgmma_k_tf32": Spec(8, "elements", _PTX, "Shapes .m64nNk8 for .tf32 inputs."),
    "wgmma_k_f16": Spec(16, "elements", _PTX, "Shapes .m64nNk16 for .f16 and .bf16 inputs."),
    "wgmma_k_fp8": Spec(32, "elements", _PTX, "Shapes .m64nNk32 for .e4m3 and .e5m2 inputs."),
    "wgmma_k_int8": Spec(32, "elements", _PTX, "Shapes .m64nNk32 for .s8 and .u8 inputs."),
    # FP8 accumulation in Hopper's Tensor Cores, as DeepSeek-V3 measured and worked around it.
    "hopper_fp8_mma_accumulation_bits": Spec(
        14, "bits", "deepseekai2024deepseekv3",
        "DeepSeek-V3 (section 3.3.2) observes that FP8 GEMMs on H800 GPUs accumulate in the Tensor "
        "Cores with about 14 bits of precision, far fewer than FP32; NVIDIA documents no figure. "
        "An observation, not a specification.",
        uncertain=True),
    "deepseek_v3_fp8_promotion_elements": Spec(
        128, "elements of K", "deepseekai2024deepseekv3",
        "DeepSeek-V3 copies the Tensor Cores' partial sums to FP32 registers on the CUDA cores "
        "every 128 elements of K (four WGMMAs), where they are accumulated in full FP32."),
})
# [/hardware:facts]


def fact(name: str) -> float | int:
    """The value of one fact (raw SI units, or a count)."""
    return FACTS[name].value


def uncertain_facts() -> dict[str, Spec]:
    return {k: v for k, v in FACTS.items() if v.uncertain}
