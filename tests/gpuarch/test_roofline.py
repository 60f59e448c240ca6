"""The roofline: the bound, the ridge point, and matmul intensity."""

from __future__ import annotations

import math

import matplotlib
import pytest

from infralens import hardware as hw
from infralens.gpuarch.roofline import (
    Point,
    Roof,
    attainable_flops,
    gemm_bytes,
    gemm_flops,
    gemm_intensity,
    min_time_seconds,
    plot_roofline,
    roof_of,
    skinny_crossover_m,
)

matplotlib.use("Agg")


@pytest.mark.parametrize("gpu", list(hw.GPUS.values()), ids=lambda g: g.key)
def test_datasheet_ridge_is_the_hardware_modules(gpu):
    roof = roof_of(gpu)
    assert roof.ridge == pytest.approx(hw.ridge_point(gpu, "bf16"), rel=1e-12)
    # At the ridge both bounds agree; half the ridge gets half the peak.
    assert roof.attainable(roof.ridge) == pytest.approx(roof.peak_flops)
    assert roof.attainable(roof.ridge / 2) == pytest.approx(roof.peak_flops / 2)
    assert roof.attainable(10 * roof.ridge) == roof.peak_flops
    assert roof.bound(roof.ridge / 2) == "memory" and roof.bound(roof.ridge) == "compute"


def test_attainable_is_min_of_the_two_bounds():
    assert attainable_flops(1.0, 100.0, 10.0) == 10.0
    assert attainable_flops(50.0, 100.0, 10.0) == 100.0
    with pytest.raises(ValueError):
        attainable_flops(-1.0, 100.0, 10.0)


def test_square_gemm_intensity_is_n_over_3_in_bf16():
    for n in (128, 1000, 8192):
        assert gemm_intensity(n, n, n) == pytest.approx(n / 3)
        assert gemm_flops(n, n, n) == 2 * n**3
        assert gemm_bytes(n, n, n) == 3 * n * n * 2
    # fp32 in and out: half the intensity of bf16.
    assert gemm_intensity(1024, 1024, 1024, 4) == pytest.approx(1024 / 6)


def test_gemv_intensity_is_about_one_flop_per_byte_in_bf16():
    # m = 1 against a k x n weight: 2 n k FLOP over (n k + k + n) x 2 bytes -> about 1.
    assert gemm_intensity(1, 8192, 8192) == pytest.approx(1.0, rel=1e-3)


def test_skinny_crossover_is_near_the_ridge_in_tokens():
    roof = roof_of(hw.GPUS["h100"])
    m = skinny_crossover_m(8192, 8192, roof)
    assert gemm_intensity(m, 8192, 8192) >= roof.ridge > gemm_intensity(m - 1, 8192, 8192)
    # For m << n, k the intensity is about m (2-byte elements), so m is a bit above the ridge.
    assert roof.ridge < m < 1.2 * roof.ridge


def test_min_time_is_the_slower_of_compute_and_traffic():
    roof = Roof("toy", 100.0, 10.0)
    assert min_time_seconds(100.0, 1.0, roof) == 1.0
    assert min_time_seconds(1.0, 100.0, roof) == 10.0


def test_plot_draws_every_roof_and_point():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    roofs = [roof_of(hw.GPUS["h100"]), Roof("measured", 7e14, 3e12)]
    plot_roofline(ax, roofs, [Point("a", 1.0, 2e12), Point("b", 1000.0, 6e14)])
    assert len(ax.get_lines()) == 2 * len(roofs) + 1
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    plt.close(fig)
    assert math.isfinite(roofs[1].ridge)


# The hierarchical roofline and the stacked matmuls of a decode step.

from infralens.gpuarch.roofline import (  # noqa: E402
    LevelTraffic,
    decoder_matmul_shapes,
    level_bound,
    stacked_crossover_m,
    stacked_gemm_intensity,
    tiled_gemm_bytes,
)


def _tiles_by_enumeration(m, n, k, tm, tn, e, out):
    """Walk every output tile and add up the panels it reads and the tile it writes."""
    total = 0
    for i0 in range(0, m, tm):
        for j0 in range(0, n, tn):
            rows, cols = min(tm, m - i0), min(tn, n - j0)
            total += (rows * k + k * cols) * e + rows * cols * out
    return total


@pytest.mark.parametrize("m,n,k,tm,tn", [(256, 512, 64, 128, 128), (300, 200, 17, 64, 96),
                                          (8, 8, 8, 8, 8), (1, 1000, 33, 128, 256)])
def test_tiled_bytes_match_an_enumeration_of_tiles(m, n, k, tm, tn):
    assert tiled_gemm_bytes(m, n, k, tm, tn) == _tiles_by_enumeration(m, n, k, tm, tn, 2, 2)
    assert tiled_gemm_bytes(m, n, k, tm, tn, 1, 0) == _tiles_by_enumeration(m, n, k, tm, tn, 1, 0)


def test_one_tile_as_large_as_c_is_the_least_traffic():
    assert tiled_gemm_bytes(96, 80, 40, 96, 80) == gemm_bytes(96, 80, 40)
    # A square tile t of 2-byte elements has intensity t / 2 against its own traffic, less C.
    t, n = 128, 4096
    flops = gemm_flops(n, n, n)
    assert flops / tiled_gemm_bytes(n, n, n, t, t, out_bytes=0) == pytest.approx(t / 2)


def test_level_bound_takes_the_slowest_known_level():
    f, p = 1e12, 1e15  # 1 ms of compute
    levels = [LevelTraffic("HBM", 2e9, 1e12), LevelTraffic("L2", 5e9, None),
              LevelTraffic("shared", 1e10, 2e13)]
    b = level_bound(f, p, levels)
    assert b.limiter == "HBM" and b.seconds == pytest.approx(2e-3)
    assert b.times["L2"] is None and b.times["compute"] == pytest.approx(1e-3)
    assert level_bound(f, p, [LevelTraffic("HBM", 1e8, 1e12)]).limiter == "compute"
    lv = levels[2]
    assert lv.bandwidth_needed(f, p) * (f / p) == pytest.approx(lv.bytes_moved)
    assert lv.intensity(f) == pytest.approx(100.0)


def test_decoder_shapes_hold_every_matmul_weight_of_the_model():
    from infralens.memory import count_parameters
    from infralens.models import load_config, shipped_config

    shape = load_config(shipped_config("llama-3-8b"))
    pc = count_parameters(shape)
    shapes = decoder_matmul_shapes(shape)
    assert len(shapes) == 7 * shape.n_layers + 1
    # No biases in Llama: the matmul weights are everything but the embedding and the norms.
    assert sum(k * n for k, n in shapes) == pc.total - pc.embedding - pc.norms


def test_stacked_intensity_of_one_matmul_is_its_own():
    roof = Roof("toy", 1e15, 2e12)
    assert stacked_gemm_intensity(7, [(512, 384)]) == pytest.approx(gemm_intensity(7, 384, 512))
    assert stacked_crossover_m([(4096, 4096)], roof) == skinny_crossover_m(4096, 4096, roof)
    # Activations only add bytes: the stack needs a larger batch than 2 m / e = ridge suggests.
    shapes, roof = [(1024, 4096), (4096, 1024)] * 3, Roof("toy", 2e14, 2e12)  # ridge 100
    m = stacked_crossover_m(shapes, roof)
    assert stacked_gemm_intensity(m, shapes) >= roof.ridge > stacked_gemm_intensity(m - 1, shapes)
    assert m > math.ceil(roof.ridge)
