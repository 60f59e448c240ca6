"""Quantities computed from the sourced constants: peak rates, ridge points, clocks, sweeps.

Pure functions of :mod:`~infralens.hardware.specs` (and of :mod:`~infralens.hardware.facts`
for the per-SM pipe widths); nothing here is typed in twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from infralens.hardware.specs import DTYPES, GPU, GPUS, Spec

__all__ = [
    "peak_flops", "ridge_point", "hbm_sweep_seconds", "implied_tensor_clock_hz",
    "hbm_bytes_per_sm_per_clock", "citation_keys", "uncertain_specs",
]


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


def citation_keys(gpus: Iterable[GPU] | None = None) -> set[str]:
    """Every BibTeX key the GPU constants cite."""
    gpus = GPUS.values() if gpus is None else gpus
    return {s.source for g in gpus for s in g.specs().values()}


def uncertain_specs(gpus: Iterable[GPU] | None = None) -> list[tuple[GPU, str, Spec]]:
    """(gpu, field name, spec) for every Spec flagged uncertain."""
    gpus = GPUS.values() if gpus is None else gpus
    return [(g, name, s) for g in gpus for name, s in g.specs().items() if s.uncertain]


