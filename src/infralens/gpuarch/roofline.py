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
    "min_time_seconds", "skinny_crossover_m", "plot_roofline", "tiled_gemm_bytes", "LevelTraffic",
    "LevelBound", "level_bound", "decoder_matmul_shapes", "stacked_gemm_intensity",
    "stacked_crossover_m",
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


def _first_m_at(target: float, intensity_of) -> int:
    """The smallest m >= 1 with intensity_of(m) >= target, for an intensity that grows with m."""
    lo, hi = 1, 1
    while intensity_of(hi) < target:
        hi *= 2
        if hi > 2**40:
            raise ValueError("this matmul never reaches the ridge point")
    while lo < hi:  # bisect for the first m at or past the target
        mid = (lo + hi) // 2
        if intensity_of(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def skinny_crossover_m(n: int, k: int, roof: Roof, in_bytes: int = 2) -> int:
    """The smallest m at which an (m x k) by (k x n) matmul reaches the ridge point.

    For m much smaller than n and k the intensity is about 2 m / in_bytes: m tokens against a
    weight matrix, which is why a decode step with few tokens per weight is memory-bound.
    """
    return _first_m_at(roof.ridge, lambda m: gemm_intensity(m, n, k, in_bytes))


# [gpuarch:stacked-gemm]
def decoder_matmul_shapes(shape) -> list[tuple[int, int]]:
    """The (k, n) weight matrices one token passes through in a dense decoder
    (a :class:`~infralens.models.config.ModelShape`): per layer W_q, W_k, W_v, W_o and the MLP's
    matrices (gate, up, down for SwiGLU; up, down for GELU), then the LM head. The input
    embedding is a lookup, not a matmul."""
    if getattr(shape, "is_moe", False):
        raise ValueError("a mixture of experts routes tokens to different weights; dense models only")
    d, f = shape.d_model, shape.d_ff
    q, kv = shape.n_heads * shape.head_dim, shape.n_kv_heads * shape.head_dim
    mlp = [(d, f), (d, f), (f, d)] if shape.mlp == "swiglu" else [(d, f), (f, d)]
    return [(d, q), (d, kv), (d, kv), (q, d), *mlp] * shape.n_layers + [(d, shape.vocab_size)]


def stacked_gemm_intensity(m: int, shapes: Sequence[tuple[int, int]], in_bytes: int = 2) -> float:
    """FLOP per HBM byte of m tokens through a stack of matmuls, each with the least traffic of
    :func:`gemm_bytes`: its (k x n) weight read once, its (m x k) input read and its (m x n) output
    written once. The activations are what keeps a large batch below 2 m / in_bytes."""
    flops = sum(gemm_flops(m, n, k) for k, n in shapes)
    moved = sum(gemm_bytes(m, n, k, in_bytes) for k, n in shapes)
    return flops / moved


def stacked_crossover_m(shapes: Sequence[tuple[int, int]], roof: Roof, in_bytes: int = 2) -> int:
    """The smallest m at which :func:`stacked_gemm_intensity` reaches the ridge point."""
    return _first_m_at(roof.ridge, lambda m: stacked_gemm_intensity(m, shapes, in_bytes))
# [/gpuarch:stacked-gemm]


# [gpuarch:levels]
def tiled_gemm_bytes(m: int, n: int, k: int, tile_m: int, tile_n: int, in_bytes: int = 2,
                     out_bytes: int | None = None) -> int:
    """Bytes a matmul tiled into (tile_m x tile_n) output tiles moves into the units that own the
    tiles: each tile reads its tile_m x k panel of A and its k x tile_n panel of B once and writes
    its part of C once. Block tiles give the L2-to-SM traffic, warp(group) tiles the operand reads
    from shared memory (pass ``out_bytes=0``: accumulators stay in registers). One tile as large
    as C gives :func:`gemm_bytes`."""
    if min(m, n, k, tile_m, tile_n) < 1:
        raise ValueError("sizes and tiles must be >= 1")
    out_bytes = in_bytes if out_bytes is None else out_bytes
    tiles_m, tiles_n = -(-m // tile_m), -(-n // tile_n)
    return (tiles_n * m * k + tiles_m * k * n) * in_bytes + m * n * out_bytes


@dataclass(frozen=True)
class LevelTraffic:
    """The bytes a kernel moves through one level of the memory hierarchy, and that level's
    bandwidth (None where no figure is published: it must be measured)."""

    level: str
    bytes_moved: float
    bandwidth: float | None = None

    def intensity(self, flops: float) -> float:
        """FLOP per byte of this level's traffic."""
        return flops / self.bytes_moved

    def seconds(self) -> float | None:
        return None if self.bandwidth is None else self.bytes_moved / self.bandwidth

    def bandwidth_needed(self, flops: float, peak_flops: float) -> float:
        """Bytes/s this level must deliver for the kernel to run at ``peak_flops``."""
        return self.bytes_moved * peak_flops / flops


@dataclass(frozen=True)
class LevelBound:
    seconds: float          # max(F / P, Q_level / B_level) over the levels with a bandwidth
    limiter: str            # "compute" or the name of the level that sets the bound
    times: dict             # level (and "compute") -> its lower bound in seconds, or None


def level_bound(flops: float, peak_flops: float, levels: Sequence[LevelTraffic]) -> LevelBound:
    """The hierarchical roofline: every level's bytes against its own bandwidth, and the compute
    against the peak; the kernel takes at least the largest of these times. Levels without a
    bandwidth are listed but cannot bind."""
    if flops <= 0 or peak_flops <= 0:
        raise ValueError("flops and peak_flops must be > 0")
    times = {"compute": flops / peak_flops}
    times.update({lv.level: lv.seconds() for lv in levels})
    known = {name: t for name, t in times.items() if t is not None}
    limiter = max(known, key=known.get)
    return LevelBound(known[limiter], limiter, times)
# [/gpuarch:levels]


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
