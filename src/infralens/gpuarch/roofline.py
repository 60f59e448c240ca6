"""The roofline model: attainable FLOP/s = min(peak FLOP/s, arithmetic intensity x bandwidth).

A kernel that performs F floating-point operations and moves Q bytes to and from HBM needs at
least F / P seconds of compute (P: peak FLOP/s) and at least Q / B seconds of memory traffic (B:
bytes per second). If the two overlap perfectly, the time is the larger of the two, so the rate
F / t is at most min(P, (F / Q) B). The intensity I = F / Q where the two bounds meet, I* = P / B,
is the ridge point: below it the kernel is memory-bound, above it compute-bound
(Williams, Waterman and Patterson, 2009). The datasheet ridge of a GPU comes from
:func:`infralens.hardware.ridge_point`; a :class:`Roof` can equally hold measured ceilings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from infralens import hardware as hw

__all__ = [
    "Roof", "Point", "roof_of", "attainable_flops", "gemm_flops", "gemm_bytes", "gemm_intensity",
    "min_time_seconds", "skinny_crossover_m", "plot_roofline",
]


# [gpuarch:roof]
@dataclass(frozen=True)
class Roof:
    """One roofline: a compute ceiling (FLOP/s) and a bandwidth slope (bytes/s)."""

    name: str
    peak_flops: float
    bandwidth: float

    @property
    def ridge(self) -> float:
        """FLOP per byte where intensity x bandwidth reaches the peak: P / B."""
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """The roofline bound at ``intensity`` FLOP/byte."""
        return attainable_flops(intensity, self.peak_flops, self.bandwidth)

    def bound(self, intensity: float) -> str:
        """'memory' below the ridge point, 'compute' at or above it."""
        return "memory" if intensity < self.ridge else "compute"


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """min(peak, intensity x bandwidth), in FLOP/s."""
    if intensity < 0 or peak_flops <= 0 or bandwidth <= 0:
        raise ValueError("intensity must be >= 0 and the ceilings > 0")
    return min(peak_flops, intensity * bandwidth)


def roof_of(gpu: hw.GPU, dtype: str = "bf16") -> Roof:
    """The datasheet roofline of ``gpu``: dense Tensor-Core peak and HBM bandwidth."""
    roof = Roof(f"{gpu.name} datasheet ({dtype})", hw.peak_flops(gpu, dtype),
                float(gpu.hbm_bandwidth_bytes_per_s.value))
    assert math.isclose(roof.ridge, hw.ridge_point(gpu, dtype))  # one definition of the ridge
    return roof
# [/gpuarch:roof]


# [gpuarch:gemm-intensity]
def gemm_flops(m: int, n: int, k: int) -> int:
    """C (m x n) = A (m x k) B (k x n): m n k multiply-adds, 2 FLOP each."""
    return 2 * m * n * k


def gemm_bytes(m: int, n: int, k: int, in_bytes: int = 2, out_bytes: int | None = None) -> int:
    """The fewest HBM bytes a matmul can move: read A and B once, write C once."""
    out_bytes = in_bytes if out_bytes is None else out_bytes
    return (m * k + k * n) * in_bytes + m * n * out_bytes


def gemm_intensity(m: int, n: int, k: int, in_bytes: int = 2, out_bytes: int | None = None) -> float:
    """FLOP per byte of a matmul with perfect on-chip reuse. Square n, 2-byte elements: n / 3."""
    return gemm_flops(m, n, k) / gemm_bytes(m, n, k, in_bytes, out_bytes)
# [/gpuarch:gemm-intensity]


def min_time_seconds(flops: float, bytes_moved: float, roof: Roof) -> float:
    """The roofline's lower bound on time: max(F / P, Q / B)."""
    return max(flops / roof.peak_flops, bytes_moved / roof.bandwidth)


def skinny_crossover_m(n: int, k: int, roof: Roof, in_bytes: int = 2) -> int:
    """The smallest m at which an (m x k) by (k x n) matmul reaches the ridge point.

    For m much smaller than n and k the intensity is about 2 m / in_bytes: m tokens against a
    weight matrix, which is why a decode step with few tokens per weight is memory-bound.
    """
    lo, hi = 1, 1
    while gemm_intensity(hi, n, k, in_bytes) < roof.ridge:
        hi *= 2
        if hi > 2**40:
            raise ValueError("this matmul never reaches the ridge point")
    while lo < hi:  # intensity grows with m: bisect for the first m at or past the ridge
        mid = (lo + hi) // 2
        if gemm_intensity(mid, n, k, in_bytes) >= roof.ridge:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Point:
    """A measured (or modelled) kernel on the roofline plot."""

    label: str
    intensity: float
    flops_per_s: float


def plot_roofline(ax, roofs: Sequence[Roof], points: Iterable[Point] = (), *,
                  intensity_range: tuple[float, float] = (0.05, 2e4), styles: Sequence[str] = (),
                  annotate: bool = True, point_label_every: int = 1,
                  points_label: str = "measured kernels") -> None:
    """Draw roofs (log-log, TFLOP/s against FLOP/byte) and points on a matplotlib Axes."""
    lo, hi = intensity_range
    xs = [lo * (hi / lo) ** (i / 400) for i in range(401)]
    styles = list(styles) or ["-", "--", ":", "-."]
    for i, roof in enumerate(roofs):
        ys = [roof.attainable(x) / 1e12 for x in xs]
        (line,) = ax.plot(xs, ys, styles[i % len(styles)], lw=2,
                          label=f"{roof.name}: ridge {roof.ridge:,.0f} FLOP/B")
        if annotate:
            ax.plot([roof.ridge], [roof.peak_flops / 1e12], "o", color=line.get_color(), ms=5)
    pts = list(points)
    if pts:
        ax.plot([p.intensity for p in pts], [p.flops_per_s / 1e12 for p in pts], "kx", ms=7,
                label=points_label)
        for j, p in enumerate(pts):
            if annotate and j % max(1, point_label_every) == 0:
                ax.annotate(p.label, (p.intensity, p.flops_per_s / 1e12), textcoords="offset points",
                            xytext=(4, -10), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
