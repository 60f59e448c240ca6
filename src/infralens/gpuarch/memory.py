"""Two pieces of memory-system arithmetic: Little's law, and how many sectors a warp touches.

* **Little's law** (Little, 1961): in any steady queue, the number of requests in flight is the
  arrival rate times the time each spends in the system. For memory, bytes in flight = bandwidth
  x latency: to stream HBM at B bytes/s when a load takes l seconds to return, B l bytes must be
  outstanding at every moment, spread over the SMs and their warps.
* **Sectors**: global memory moves in 32-byte sectors. A warp's load instruction touches the
  sectors its 32 addresses fall in; the bytes moved are sectors x 32 whether or not every byte
  is used, so the efficiency of an access pattern is useful bytes / moved bytes.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["bytes_in_flight", "loads_in_flight_per_sm", "WarpSectors", "warp_sectors",
           "strided_addresses", "efficiencies", "mean_row_sectors"]


# [gpuarch:littles-law]
def bytes_in_flight(bandwidth_bytes_per_s: float, latency_s: float) -> float:
    """Little's law: the bytes that must be outstanding to sustain ``bandwidth`` at ``latency``."""
    if bandwidth_bytes_per_s < 0 or latency_s < 0:
        raise ValueError("bandwidth and latency must be non-negative")
    return bandwidth_bytes_per_s * latency_s


def loads_in_flight_per_sm(bandwidth_bytes_per_s: float, latency_s: float, sms: int,
                           bytes_per_load: int) -> float:
    """Warp-wide load instructions each SM must keep outstanding (``bytes_per_load`` per instruction,
    e.g. 32 lanes x 16 bytes for a float4 load)."""
    return bytes_in_flight(bandwidth_bytes_per_s, latency_s) / sms / bytes_per_load
# [/gpuarch:littles-law]


@dataclass(frozen=True)
class WarpSectors:
    sectors: int          # distinct 32-byte sectors touched
    bytes_moved: int      # sectors x sector size
    bytes_used: int       # bytes the lanes asked for

    @property
    def efficiency(self) -> float:
        return self.bytes_used / self.bytes_moved if self.bytes_moved else 1.0


# [gpuarch:sectors]
def warp_sectors(addresses: Sequence[int], access_bytes: int = 4,
                 sector_bytes: int = 32) -> WarpSectors:
    """The sectors one warp instruction touches, given each active lane's byte address."""
    touched = set()
    for a in addresses:
        first, last = a // sector_bytes, (a + access_bytes - 1) // sector_bytes
        touched.update(range(first, last + 1))
    used = len(set(addresses)) * access_bytes  # lanes reading the same word share it
    return WarpSectors(len(touched), len(touched) * sector_bytes, used)
# [/gpuarch:sectors]


def strided_addresses(stride_elems: int, elem_bytes: int = 4, lanes: int = 32,
                      base: int = 0) -> list[int]:
    """Lane i reads element i * stride: stride 1 is the coalesced case."""
    return [base + i * stride_elems * elem_bytes for i in range(lanes)]


def efficiencies(strides: Iterable[int], elem_bytes: int = 4) -> list[tuple[int, WarpSectors]]:
    return [(s, warp_sectors(strided_addresses(s, elem_bytes), elem_bytes)) for s in strides]


def mean_row_sectors(rows: int, cols: int, elem_bytes: int = 4, lanes: int = 32,
                     sector_bytes: int = 32) -> float:
    """Mean sectors per warp request when warps walk a row-major ``rows x cols`` matrix along its
    rows: each request is ``lanes`` consecutive elements of one row (fewer at the row's end), from
    column 0 on. A row whose length in bytes is not a multiple of the sector shifts where the next
    row starts, so some of its segments straddle one sector more than a sector-aligned one."""
    if rows < 1 or cols < 1:
        raise ValueError(f"rows and cols must be >= 1, got {rows} x {cols}")
    row_bytes = cols * elem_bytes
    period = sector_bytes // math.gcd(row_bytes, sector_bytes)  # rows until the alignment repeats
    sectors = requests = 0
    for r in range(min(rows, period)):
        count = rows // period + (r < rows % period)  # rows with this one's alignment
        start = r * row_bytes % sector_bytes
        for c0 in range(0, cols, lanes):
            segment = strided_addresses(1, elem_bytes, min(lanes, cols - c0), start + c0 * elem_bytes)
            sectors += count * warp_sectors(segment, elem_bytes, sector_bytes).sectors
            requests += count
    return sectors / requests
