"""Little's law and the sectors a warp's access touches, against hand counts."""

from __future__ import annotations

import pytest

from infralens.gpuarch.memory import (
    bytes_in_flight,
    efficiencies,
    loads_in_flight_per_sm,
    strided_addresses,
    warp_sectors,
)


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

