"""Quantities computed from the sourced constants: peak rates, ridge points, clocks, sweeps.

Pure functions of :mod:`~infralens.hardware.specs` (and of :mod:`~infralens.hardware.facts`
for the per-SM pipe widths); nothing here is typed in twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from infralens.hardware.facts import FACTS
from infralens.hardware.specs import DTYPES, GPU, GPUS, Spec

__all__ = [
    "peak_flops", "ridge_point", "hbm_sweep_seconds", "implied_tensor_clock_hz",
    "hbm_bytes_per_sm_per_clock", "fp32_clock_hz", "fp32_flops", "sfu_ops_per_s",
    "citation_keys", "uncertain_specs",
]

#: The per-SM pipe widths of :mod:`~infralens.hardware.facts`, by compute capability.
_FP32_LANES = {(8, 0): "a100_fp32_lanes_per_sm", (9, 0): "h100_fp32_lanes_per_sm"}
_SFU_RESULTS = {(8, 0): "sfu_results_per_clock_per_sm", (9, 0): "sfu_results_per_clock_per_sm"}


# [hardware:ridge]
def peak_flops(gpu: GPU, dtype: str) -> float:
    """Dense Tensor-Core peak in FLOP/s for ``dtype`` in :data:`DTYPES`."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    spec = getattr(gpu, f"dense_{dtype}_flops")
    if spec is None:
        raise ValueError(f"{gpu.name} has no {dtype} Tensor-Core rate")
    return float(spec.value)


def ridge_point(gpu: GPU, dtype: str) -> float:
    """Roofline ridge point in FLOP per byte: dense peak FLOP/s divided by HBM bytes/s.

    A kernel whose arithmetic intensity (FLOP per byte moved to or from HBM) is below this
    is bound by memory bandwidth; above it, by the Tensor Cores.
    """
    return peak_flops(gpu, dtype) / float(gpu.hbm_bandwidth_bytes_per_s.value)
# [/hardware:ridge]


def hbm_sweep_seconds(gpu: GPU) -> float:
    """Time to read every byte of HBM once at peak bandwidth: capacity / bandwidth."""
    return float(gpu.hbm_capacity_bytes.value) / float(gpu.hbm_bandwidth_bytes_per_s.value)


def implied_tensor_clock_hz(gpu: GPU) -> float | None:
    """Clock at which the printed dense BF16 rate is reached: rate / (SMs x FLOP/clock/SM)."""
    if gpu.sm_count is None or gpu.dense_bf16_flop_per_clock_per_sm is None:
        return None
    return float(gpu.dense_bf16_flops.value) / (
        gpu.sm_count.value * gpu.dense_bf16_flop_per_clock_per_sm.value)


def hbm_bytes_per_sm_per_clock(gpu: GPU) -> float | None:
    """HBM bytes each SM may consume per clock, at the clock of :func:`implied_tensor_clock_hz`."""
    clock = implied_tensor_clock_hz(gpu)
    if clock is None:
        return None
    return float(gpu.hbm_bandwidth_bytes_per_s.value) / (gpu.sm_count.value * clock)


def fp32_clock_hz(gpu: GPU) -> float:
    """The clock the vendor quotes ``gpu``'s FP32 (non-Tensor) peak at: the GPU's printed boost
    clock, or the ``<key>_boost_clock_hz`` fact. Tensor-Core rates may assume a lower clock
    (:func:`implied_tensor_clock_hz`)."""
    spec = gpu.boost_clock_hz or FACTS.get(f"{gpu.key}_boost_clock_hz")
    if spec is None:
        raise ValueError(f"{gpu.name}: no sourced boost clock")
    return float(spec.value)


def _per_sm(gpu: GPU, table: dict[tuple[int, int], str], what: str) -> int:
    if gpu.sm_count is None or gpu.compute_capability not in table:
        raise ValueError(f"{gpu.name}: no sourced {what} per SM for compute capability {gpu.cc_str}")
    return int(FACTS[table[gpu.compute_capability]].value)


def fp32_flops(gpu: GPU, clock_hz: float | None = None) -> float:
    """Peak FP32 FLOP/s on the CUDA cores, without Tensor Cores:
    SMs x FP32 lanes per SM x 2 FLOP (one FMA per lane per clock) x clock.

    ``clock_hz`` defaults to :func:`fp32_clock_hz`, the clock the vendor's FP32 rate assumes
    (H100 SXM: 132 x 128 x 2 x 1.98 GHz = 66.9 TFLOP/s).
    """
    clock = fp32_clock_hz(gpu) if clock_hz is None else clock_hz
    return gpu.sm_count.value * _per_sm(gpu, _FP32_LANES, "FP32 lane count") * 2 * clock


def sfu_ops_per_s(gpu: GPU, clock_hz: float | None = None) -> float:
    """Peak special-function results per second (exp2, log2, reciprocal, reciprocal square root,
    sine, cosine: the MUFU instructions): SMs x SFU results per clock per SM x clock.

    ``clock_hz`` defaults to :func:`fp32_clock_hz`; pass :func:`implied_tensor_clock_hz` for the
    rate while the Tensor Cores run at the clock their peak assumes (H100 SXM: 132 x 16 x 1.83 GHz
    = 3.9e12 per second, the figure FlashAttention-3 quotes).
    """
    clock = fp32_clock_hz(gpu) if clock_hz is None else clock_hz
    return gpu.sm_count.value * _per_sm(gpu, _SFU_RESULTS, "special-function throughput") * clock


def citation_keys(gpus: Iterable[GPU] | None = None) -> set[str]:
    """Every BibTeX key the GPU constants cite."""
    gpus = GPUS.values() if gpus is None else gpus
    return {s.source for g in gpus for s in g.specs().values()}


def uncertain_specs(gpus: Iterable[GPU] | None = None) -> list[tuple[GPU, str, Spec]]:
    """(gpu, field name, spec) for every Spec flagged uncertain."""
    gpus = GPUS.values() if gpus is None else gpus
    return [(g, name, s) for g in gpus for name, s in g.specs().items() if s.uncertain]


