"""Bytes per rank against a simulated ring, and the α-β times against their definitions."""

import math

import numpy as np
import pytest

from infralens.parallel import collective_bytes
from infralens.parallel.collectives import ALLREDUCE_ALGORITHMS, allreduce_time, bus_bandwidth


def ring_allreduce(arrays):
    """A ring all-reduce on n ranks that counts the bytes each rank sends."""
    n = len(arrays)
    chunks = [np.array_split(a.astype(np.float64), n) for a in arrays]
    sent = [0] * n
    for step in range(n - 1):  # reduce-scatter: rank r sends chunk (r - step) to r + 1
        moves = [(r, (r - step) % n, chunks[r][(r - step) % n].copy()) for r in range(n)]
        for r, c, data in moves:
            chunks[(r + 1) % n][c] += data
            sent[r] += data.nbytes
    for step in range(n - 1):  # all-gather: rank r sends its finished chunk (r + 1 - step)
        moves = [(r, (r + 1 - step) % n, chunks[r][(r + 1 - step) % n].copy()) for r in range(n)]
        for r, c, data in moves:
            chunks[(r + 1) % n][c] = data
            sent[r] += data.nbytes
    return [np.concatenate(c) for c in chunks], sent


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_ring_sends_what_the_formula_says(n):
    rng = np.random.default_rng(n)
    elements = 8 * n * 5
    arrays = [rng.standard_normal(elements) for _ in range(n)]
    out, sent = ring_allreduce(arrays)
    for o in out:
        np.testing.assert_allclose(o, np.sum(arrays, axis=0))
    size = elements * 8
    assert sent == [collective_bytes("all_reduce", n, size)] * n
    assert collective_bytes("reduce_scatter", n, size) == collective_bytes("all_gather", n, size) \
        == collective_bytes("all_reduce", n, size) / 2


def test_one_rank_sends_nothing_and_bad_ops_fail():
    assert collective_bytes("all_reduce", 1, 1 << 20) == 0
    with pytest.raises(ValueError):
        collective_bytes("broadcast", 4, 8)
    with pytest.raises(ValueError):
        collective_bytes("all_reduce", 0, 8)
    with pytest.raises(ValueError):
        collective_bytes("all_reduce", 4, -1)


def test_bus_bandwidth_is_nccl_tests_algbw_times_the_factor():
    n, size, t = 8, 1 << 30, 0.01
    algbw = size / t
    assert bus_bandwidth("all_reduce", n, size, t) == pytest.approx(algbw * 2 * (n - 1) / n)
    assert bus_bandwidth("all_gather", n, size, t) == pytest.approx(algbw * (n - 1) / n)


def test_allreduce_times():
    n, S, alpha, B = 16, 2**30, 5e-6, 1e11
    t = {a: allreduce_time(a, n, S, alpha, B) for a in ALLREDUCE_ALGORITHMS}
    log = math.log2(n)
    assert t["ring"] == pytest.approx(2 * (n - 1) * alpha + 2 * (n - 1) / n * S / B)
    assert t["rabenseifner"] - 2 * log * alpha == pytest.approx(t["ring"] - 2 * (n - 1) * alpha)
    assert t["recursive_doubling"] == pytest.approx(log * (alpha + S / B))
    # large messages: the bandwidth-optimal pair wins; tiny ones: the logarithmic ones do
    assert min(t, key=t.get) in ("rabenseifner", "ring")
    tiny = {a: allreduce_time(a, n, 8, alpha, B) for a in ALLREDUCE_ALGORITHMS}
    assert tiny["ring"] > tiny["double_binary_tree"] > tiny["recursive_doubling"]
    assert allreduce_time("ring", 1, S, alpha, B) == 0.0
    with pytest.raises(ValueError):
        allreduce_time("rabenseifner", 6, S, alpha, B)
