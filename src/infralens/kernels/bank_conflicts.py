"""Shared-memory banks on the CPU: which bank each lane of a warp hits, and the conflict degree.

The model is the one the CUDA C++ Programming Guide gives for compute capability 5.0 and later
(so for sm_80 and sm_90): shared memory is split into 32 banks, each 4 bytes wide, and 32-bit
word ``w`` lives in bank ``w % 32``. A warp's 32-bit access is served in one pass if every bank
delivers at most one word; lanes that read the *same* word share it (broadcast), and lanes that
write the same word cost one write. When a bank must deliver ``k`` different words, the access
takes ``k`` passes: a ``k``-way bank conflict. Nsight Compute calls each pass a *wavefront*, so
the degree computed here is the number of shared-memory wavefronts one warp instruction needs.

Lab 05 applies it to the transpose tiles (32x32, 32x33, XOR-swizzled) and Lab 04 to the
reduction trees; tests check it against degrees derived by hand.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

BANKS = 32       # banks of shared memory
BANK_BYTES = 4   # each bank delivers one 32-bit word per pass
WARP = 32        # lanes per warp
WORD_BYTES = 4   # the accesses modelled here are 32 bits or narrower (float, int, half)


# [banks:bank-model]
def bank_of(byte_address: int, banks: int = BANKS, bank_bytes: int = BANK_BYTES) -> int:
    """The bank that serves the 4-byte word containing ``byte_address``."""
    return (byte_address // bank_bytes) % banks


@dataclass(frozen=True)
class WarpAccess:
    """One warp instruction's shared-memory access, lane by lane."""

    addresses: tuple[int | None, ...]  # byte address per lane; None for an inactive lane
    banks: tuple[int | None, ...]      # bank per lane; None for an inactive lane
    degree: int                        # passes (wavefronts) needed; 0 when no lane is active

    @property
    def active(self) -> int:
        return sum(a is not None for a in self.addresses)


def warp_access(addresses: Sequence[int | None], *, banks: int = BANKS,
                bank_bytes: int = BANK_BYTES) -> WarpAccess:
    """Degree of one access of 32 bits or less per lane: the most *distinct* 4-byte words any one
    bank must deliver. Lanes inside the same word (a 2-byte half of it, say) share that word."""
    if len(addresses) > WARP:
        raise ValueError(f"a warp has {WARP} lanes, got {len(addresses)} addresses")
    if any(a is not None and a < 0 for a in addresses):
        raise ValueError("byte addresses must be non-negative")
    words_in_bank: dict[int, set[int]] = defaultdict(set)
    for address in addresses:
        if address is not None:
            words_in_bank[bank_of(address, banks, bank_bytes)].add(address // bank_bytes)
    degree = max((len(words) for words in words_in_bank.values()), default=0)
    lane_banks = tuple(None if a is None else bank_of(a, banks, bank_bytes) for a in addresses)
    return WarpAccess(tuple(addresses), lane_banks, degree)
# [/banks:bank-model]


# --- Lab 05: transpose tiles ----------------------------------------------------------------------

# [banks:tile-layout]
@dataclass(frozen=True)
class TileLayout:
    """A tile in shared memory, row-major: element (i, j) sits at element offset ``index(i, j)``.

    ``pitch`` is the number of elements from one row's start to the next (33 for the padded
    float tile); ``swizzle`` stores column j of row i at column j ^ i instead (pitch == cols).
    """

    name: str
    pitch: int = 32
    swizzle: bool = False
    rows: int = 32
    cols: int = 32
    elem_bytes: int = 4      # float32; 2 for a half-precision tile

    def index(self, i: int, j: int) -> int:
        column = j ^ i if self.swizzle else j
        return i * self.pitch + column

    def address(self, i: int, j: int) -> int:
        return self.index(i, j) * self.elem_bytes

    def row_start(self, i: int) -> int:
        """Byte offset where row i begins (its first stored word, whatever element it holds)."""
        return i * self.pitch * self.elem_bytes

    def chunk_elements(self, i: int, chunk: int, chunk_bytes: int = 16) -> list[int]:
        """The column indices j of the elements stored, in address order, in one aligned
        ``chunk_bytes`` chunk of row i: what a vector load of that chunk would return."""
        per_chunk = chunk_bytes // self.elem_bytes
        stored = {self.index(i, j) - i * self.pitch: j for j in range(self.cols)}
        return [stored[c] for c in range(chunk * per_chunk, (chunk + 1) * per_chunk) if c in stored]

    @property
    def bytes(self) -> int:
        return self.rows * self.pitch * self.elem_bytes


TILE_32x32 = TileLayout("32x32")
TILE_32x33 = TileLayout("32x33", pitch=33)
TILE_SWIZZLED = TileLayout("32x32 xor", swizzle=True)
LAYOUTS = (TILE_32x32, TILE_32x33, TILE_SWIZZLED)


def tile_row_access(layout: TileLayout, i: int) -> WarpAccess:
    """Lane j touches element (i, j): how the transposes write a row of the input into the tile."""
    return warp_access([layout.address(i, j) for j in range(min(layout.cols, WARP))])


def tile_column_access(layout: TileLayout, j: int) -> WarpAccess:
    """Lane i touches element (i, j): how the transposes read a column of the tile."""
    return warp_access([layout.address(i, j) for i in range(min(layout.rows, WARP))])
# [/banks:tile-layout]


def tile_report(layouts: Iterable[TileLayout] = LAYOUTS) -> list[dict]:
    """Worst conflict degree of a row access and of a column access, for each layout."""
    rows = []
    for layout in layouts:
        row = max(tile_row_access(layout, i).degree for i in range(layout.rows))
        column = max(tile_column_access(layout, j).degree for j in range(layout.cols))
        rows.append({"layout": layout.name, "row_degree": row, "column_degree": column,
                     "shared_bytes": layout.bytes})
    return rows


# --- Lab 04: reduction trees ----------------------------------------------------------------------

TREE_KINDS = ("interleaved_divergent", "interleaved_strided", "sequential")


def tree_level(kind: str, stride: int, block: int = 256) -> list[tuple[int, int] | None]:
    """Per thread of the block: the pair of slots (destination, source) it adds at one level of
    the shared-memory tree, or None if the thread's lane is predicated off at that level.

    * ``interleaved_divergent`` (rung 1): threads with ``tid % (2*stride) == 0`` add ``tid + stride``
      into ``tid``;
    * ``interleaved_strided`` (rung 2): thread ``tid`` adds ``2*stride*tid + stride`` into
      ``2*stride*tid`` while that is inside the block;
    * ``sequential`` (rungs 3 to 5): threads ``tid < stride`` add ``tid + stride`` into ``tid``.
    """
    pairs: list[tuple[int, int] | None] = []
    for tid in range(block):
        if kind == "interleaved_divergent":
            pairs.append((tid, tid + stride) if tid % (2 * stride) == 0 else None)
        elif kind == "interleaved_strided":
            idx = 2 * stride * tid
            pairs.append((idx, idx + stride) if idx < block else None)
        elif kind == "sequential":
            pairs.append((tid, tid + stride) if tid < stride else None)
        else:
            raise ValueError(f"unknown tree {kind!r}: expected one of {', '.join(TREE_KINDS)}")
    return pairs


def tree_strides(kind: str, block: int = 256) -> list[int]:
    """The strides of the tree's levels in the order the kernel runs them."""
    strides, s = [], 1
    while s < block:
        strides.append(s)
        s *= 2
    return strides[::-1] if kind == "sequential" else strides


def tree_report(kind: str, block: int = 256) -> list[dict]:
    """Level by level: active threads and warps, and the worst degree of the level's accesses
    (the load of the destination, the load of the source and the store are three instructions).

    ``instructions`` and ``wavefronts`` count the shared-memory requests of warps with at least
    one lane on. The compiled kernels predicate the tree (no branch), so every warp *issues* every
    level; a warp with no lane on sends no request, and Nsight Compute's shared ld/st instruction
    counters leave it out too."""
    rows = []
    for stride in tree_strides(kind, block):
        pairs = tree_level(kind, stride, block)
        worst, warps, wavefronts, instructions = 0, 0, 0, 0
        for w in range(block // WARP):
            lanes = pairs[w * WARP:(w + 1) * WARP]
            if all(p is None for p in lanes):
                continue  # no lane on: the warp issues the predicated add but sends no request
            warps += 1
            for slot in (0, 1, 0):  # load s[dst], load s[src], store s[dst]
                access = warp_access([None if p is None else p[slot] * WORD_BYTES for p in lanes])
                worst = max(worst, access.degree)
                wavefronts += access.degree
                instructions += 1
        rows.append({"stride": stride, "active_threads": sum(p is not None for p in pairs),
                     "active_warps": warps, "worst_degree": worst,
                     "wavefronts": wavefronts, "instructions": instructions})
    return rows


def tree_reduce(values: Sequence, combine, pad, kind: str = "sequential", block: int = 256):
    """One block's shared-memory tree, run in Python on ``values``: the slots past the input hold
    ``pad`` (what the kernel stores there, 0 in the sum's rungs), and every level applies
    ``combine(s[dst], s[src])`` to the pairs :func:`tree_level` gives. Returns slot 0, the block's
    result, so a wrong ``pad`` (one that is not the identity of ``combine``) shows."""
    if len(values) > block:
        raise ValueError(f"{len(values)} values do not fit in a block of {block}")
    s = list(values) + [pad] * (block - len(values))
    for stride in tree_strides(kind, block):
        for pair in tree_level(kind, stride, block):
            if pair is not None:  # within a level no slot is both read and written
                s[pair[0]] = combine(s[pair[0]], s[pair[1]])
    return s[0]


# [banks:block-totals]
def rung_block_totals(rung: int, block: int = 256) -> dict[str, int]:
    """Shared-memory requests and wavefronts of one block of a tree rung (1 to 5), warp by warp:
    the first store of every warp, the tree's levels, and the final read(s). A request is a warp
    instruction with at least one lane on (see :func:`tree_report`); every access is modelled as a
    32-bit one, so a pair of loads that ptxas merges into one 64-bit load counts as two here.

    Rungs 1 and 2 use their own trees, rungs 3 and 4 the sequential one; rung 5 stops the
    sequential tree at a warp's worth of pairs and lets warp 0 read two slots per lane.
    Nsight Compute counts the same quantities (shared ld/st instructions and wavefronts)."""
    kinds = {1: "interleaved_divergent", 2: "interleaved_strided", 3: "sequential", 4: "sequential",
             5: "sequential"}
    if rung not in kinds:
        raise ValueError(f"rung {rung} has no shared-memory tree (rungs 1 to 5 do)")
    warps = block // WARP
    totals = {"ld_inst": 0, "ld_wavefronts": 0, "st_inst": warps, "st_wavefronts": warps}
    for stride in tree_strides(kinds[rung], block):
        if rung == 5 and stride <= WARP:
            continue  # the last levels happen in registers
        pairs = tree_level(kinds[rung], stride, block)
        for w in range(warps):
            lanes = pairs[w * WARP:(w + 1) * WARP]
            if all(p is None for p in lanes):
                continue
            for slot, op in ((0, "ld"), (1, "ld"), (0, "st")):
                access = warp_access([None if p is None else p[slot] * WORD_BYTES for p in lanes])
                totals[f"{op}_inst"] += 1
                totals[f"{op}_wavefronts"] += access.degree
    final_reads = 2 if rung == 5 else 1  # s[tid] and s[tid + 32] by warp 0, or s[0] by thread 0
    totals["ld_inst"] += final_reads
    totals["ld_wavefronts"] += final_reads
    return totals
# [/banks:block-totals]
