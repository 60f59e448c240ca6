"""Little's law and the sectors a warp's access touches, against hand counts, a brute-force count
and the sector counters Nsight Compute read on an H100 (Lab 05's record)."""

from __future__ import annotations

import random

import pytest

from infralens.gpuarch.memory import (
    bytes_in_flight,
    efficiencies,
    loads_in_flight_per_sm,
    mean_row_sectors,
    strided_addresses,
    warp_sectors,
)
from infralens.tools.glue import record


def test_littles_law():
    assert bytes_in_flight(1e12, 1e-6) == pytest.approx(1e6)
    # 132 SMs, 512-byte warp loads: 1 MB in flight is 1e6 / 132 / 512 loads per SM.
    assert loads_in_flight_per_sm(1e12, 1e-6, 132, 512) == pytest.approx(1e6 / 132 / 512)
    with pytest.raises(ValueError):
        bytes_in_flight(-1, 1)


def test_sectors_of_strided_and_vector_loads():
    # 32 lanes x 4 B consecutive = 128 B = 4 sectors: fully used.
    assert warp_sectors(strided_addresses(1)).sectors == 4
    assert warp_sectors(strided_addresses(1)).efficiency == 1.0
    # Stride 2: 8 sectors for the same 128 useful bytes; stride 8 or more: one sector per lane.
    table = dict(efficiencies((1, 2, 8, 32)))
    assert table[2].sectors == 8 and table[2].efficiency == 0.5
    assert table[8].sectors == 32 and table[32].sectors == 32
    # float4 per lane: 512 B, 16 sectors, all used.
    v = warp_sectors(strided_addresses(4), access_bytes=16)
    assert (v.sectors, v.bytes_used) == (16, 512)
    # A misaligned float4 straddles sectors: 17 sectors for 512 B.
    assert warp_sectors(strided_addresses(4, base=8), access_bytes=16).sectors == 17
    # Every lane reading the same word: one sector, 4 useful bytes.
    assert warp_sectors([0] * 32).sectors == 1 and warp_sectors([0] * 32).bytes_used == 4



def row_sectors_by_enumeration(rows: int, cols: int, elem_bytes: int = 4, lanes: int = 32,
                               sector_bytes: int = 32) -> tuple[int, int]:
    """(sectors, requests) of every warp request of a row-major matrix at address 0, walked along
    its rows ``lanes`` elements at a time: each request covers the bytes [first, last] of its
    elements and touches the sectors from first // sector to last // sector."""
    sectors = requests = 0
    for r in range(rows):
        for c0 in range(0, cols, lanes):
            first = (r * cols + c0) * elem_bytes
            last = (r * cols + min(c0 + lanes, cols)) * elem_bytes - 1
            sectors += last // sector_bytes - first // sector_bytes + 1
            requests += 1
    return sectors, requests


def test_mean_row_sectors_of_lab05s_matrix_by_enumeration():
    # 4103 x 4101 floats: a row is 16,404 B, 20 B past a multiple of 32, so the alignment of row
    # starts repeats every 8 rows. 4103 x ceil(4101 / 32) = 529,287 requests.
    sectors, requests = row_sectors_by_enumeration(4103, 4101)
    assert requests == 4103 * 129 == 529_287
    assert mean_row_sectors(4103, 4101) == sectors / requests


def test_mean_row_sectors_is_what_nsight_compute_counted_on_an_h100():
    # The tiled copy reads the matrix row segment by row segment, one warp request each: its global
    # load sectors over requests, as the hardware counted them, is the mean this function predicts.
    rec = record("lab05-transpose-counters").results
    copy = rec["kernels"]["copy_tile"]
    sectors = copy["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"]
    requests = copy["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
    assert requests == rec["rows"] * -(-rec["cols"] // 32)
    assert mean_row_sectors(rec["rows"], rec["cols"]) == pytest.approx(sectors / requests, rel=1e-12)


def test_mean_row_sectors_by_hand():
    # Rows a multiple of 32 bytes long: every full 128-byte segment touches exactly 4 sectors.
    assert mean_row_sectors(7, 64) == 4.0
    assert mean_row_sectors(1, 1) == 1.0
    # One row of 33 floats: a 4-sector segment and a 1-element one.
    assert mean_row_sectors(1, 33) == (4 + 1) / 2
    # Two rows of 33 floats: row 1 starts 132 B in (4 B past a sector), its 128 B segment spans 5
    # sectors and its last element sits in the sector after.
    assert mean_row_sectors(2, 33) == (4 + 1 + 5 + 1) / 4
    # fp16 rows of 8 elements (16 B): two rows share each sector, one request per row.
    assert mean_row_sectors(4, 8, elem_bytes=2) == 1.0


@pytest.mark.parametrize("seed", range(40))
def test_mean_row_sectors_matches_enumeration_on_random_shapes(seed):
    rng = random.Random(seed)
    rows, cols = rng.randrange(1, 70), rng.randrange(1, 300)
    elem, lanes, sector = rng.choice([1, 2, 4, 8, 12, 16]), rng.choice([1, 8, 16, 32]), rng.choice([32, 64])
    sectors, requests = row_sectors_by_enumeration(rows, cols, elem, lanes, sector)
    assert mean_row_sectors(rows, cols, elem, lanes, sector) == sectors / requests


@pytest.mark.parametrize("rows, cols", [(0, 4), (4, 0), (-1, 4)])
def test_mean_row_sectors_refuses_an_empty_matrix(rows, cols):
    with pytest.raises(ValueError, match="rows and cols must be >= 1") as err:
        mean_row_sectors(rows, cols)
    assert "\n" not in str(err.value)
