"""The shared-memory bank simulator against conflict degrees derived by hand."""

import math
import operator
import random

import pytest

from infralens.kernels.bank_conflicts import (
    LAYOUTS,
    TILE_SWIZZLED,
    TILE_32x32,
    TILE_32x33,
    TileLayout,
    bank_of,
    rung_block_totals,
    tile_column_access,
    tile_report,
    tile_row_access,
    tree_level,
    tree_reduce,
    tree_report,
    warp_access,
)


def test_bank_of_wraps_every_32_words():
    assert [bank_of(4 * w) for w in (0, 1, 31, 32, 33, 64)] == [0, 1, 31, 0, 1, 0]
    assert bank_of(4 * 5 + 3) == 5  # every byte of a word is in the word's bank


def test_distinct_banks_broadcast_and_conflicts():
    assert warp_access([4 * lane for lane in range(32)]).degree == 1  # one word per bank
    assert warp_access([0] * 32).degree == 1  # same word: broadcast, not a conflict
    assert warp_access([0, 128]).degree == 2  # words 0 and 32 share bank 0
    assert warp_access([8 * lane for lane in range(32)]).degree == 2  # stride 2 words: 2-way
    assert warp_access([None] * 32).degree == 0  # no active lane, no pass
    assert warp_access([4 * lane if lane % 2 else None for lane in range(32)]).active == 16


def test_bad_addresses_are_rejected():
    with pytest.raises(ValueError, match="32 lanes"):
        warp_access(list(range(0, 4 * 33, 4)))
    with pytest.raises(ValueError, match="non-negative"):
        warp_access([-4])
    assert warp_access([0, 2]).degree == 1  # two halves of one word: shared, not a conflict


@pytest.mark.parametrize("i", [0, 1, 17, 31])
def test_row_access_is_conflict_free_in_every_layout(i):
    for layout in LAYOUTS:
        assert tile_row_access(layout, i).degree == 1, layout.name


@pytest.mark.parametrize("j", [0, 5, 31])
def test_column_access_32x32_is_32_way_and_padding_or_swizzle_fix_it(j):
    # 32x32: lane i reads word 32 i + j, always bank j. 32x33: word 33 i + j, bank (i + j) % 32.
    assert tile_column_access(TILE_32x32, j).banks == (j,) * 32
    assert tile_column_access(TILE_32x32, j).degree == 32
    assert sorted(tile_column_access(TILE_32x33, j).banks) == list(range(32))
    assert tile_column_access(TILE_32x33, j).degree == 1
    assert tile_column_access(TILE_SWIZZLED, j).degree == 1  # bank j ^ i: all different


def test_tile_report_and_sizes():
    report = {row["layout"]: row for row in tile_report()}
    assert report["32x32"] == {"layout": "32x32", "row_degree": 1, "column_degree": 32,
                               "shared_bytes": 4096}
    assert report["32x33"]["column_degree"] == 1 and report["32x33"]["shared_bytes"] == 4224
    assert report["32x32 xor"]["column_degree"] == 1 and report["32x32 xor"]["shared_bytes"] == 4096


def test_swizzle_is_a_permutation_of_each_row():
    for i in range(32):
        assert sorted(TILE_SWIZZLED.index(i, j) for j in range(32)) == list(range(32 * i, 32 * i + 32))


def test_reduction_trees_by_hand():
    # Rung 2 at stride s: thread t adds slot 2st + s into slot 2st, so a warp's active lanes are
    # 2s words apart. s=1: 32 lanes on the 16 even banks -> 2-way; s=2: 32 lanes on 8 banks ->
    # 4-way; s=4: 32 lanes on banks 0, 8, 16, 24 -> 8-way; s=8: 16 lanes on banks 0 and 16 ->
    # 8-way; s=16: 8 lanes, all bank 0 -> 8-way; s=32, 64, 128: 4, 2, 1 lanes in bank 0.
    strided = {row["stride"]: row["worst_degree"] for row in tree_report("interleaved_strided")}
    assert strided == {1: 2, 2: 4, 4: 8, 8: 8, 16: 8, 32: 4, 64: 2, 128: 1}
    assert {row["worst_degree"] for row in tree_report("sequential")} == {1}
    assert {row["worst_degree"] for row in tree_report("interleaved_divergent")} == {1}
    # Three shared accesses per active warp and level. Rung 1 keeps all 8 warps busy for five
    # levels, then 4, 2, 1: 3 * (40 + 7) = 141 instructions, one wavefront each. Rung 2 packs the
    # work into 4, 2, 1, 1, 1, 1, 1, 1 warps: 3 * 12 = 36 instructions, but the same 141 wavefronts.
    divergent, packed = tree_report("interleaved_divergent"), tree_report("interleaved_strided")
    assert sum(r["instructions"] for r in divergent) == sum(r["wavefronts"] for r in divergent) == 141
    assert sum(r["instructions"] for r in packed) == 36
    assert sum(r["wavefronts"] for r in packed) == 141
    sequential = tree_report("sequential")
    assert sum(r["wavefronts"] for r in sequential) == sum(r["instructions"] for r in sequential)


def test_every_tree_sums_each_slot_exactly_once():
    for kind in ("interleaved_divergent", "interleaved_strided", "sequential"):
        values = list(range(256))
        for row in tree_report(kind):
            for pair in tree_level(kind, row["stride"]):
                if pair:
                    values[pair[0]] += values[pair[1]]
        assert values[0] == sum(range(256)), kind
    with pytest.raises(ValueError, match="unknown tree"):
        tree_level("spiral", 1)


def test_half_precision_tiles_need_a_word_of_padding():
    # fp16: element (i, j) of a 32x32 tile is at byte 64 i + 2 j, word 16 i + j // 2, so a column
    # touches banks j//2 and j//2 + 16 only: 16-way. Padding by one word (2 halves) makes the row
    # stride 17 words, odd, so the 32 rows land in 32 different banks.
    half = TileLayout("fp16 32x32", elem_bytes=2)
    half_padded = TileLayout("fp16 32x34", pitch=34, elem_bytes=2)
    assert tile_column_access(half, 0).degree == 16
    assert tile_column_access(half_padded, 0).degree == 1
    assert tile_row_access(half, 3).degree == 1  # 32 halves = 16 words in 16 banks


@pytest.mark.parametrize("pitch, degree", [(32, 32), (33, 1), (34, 2), (36, 4), (40, 8), (48, 16)])
def test_column_degree_is_the_gcd_of_pitch_and_banks(pitch, degree):
    assert tile_column_access(TileLayout("p", pitch=pitch), 0).degree == degree


def test_block_totals_per_rung():
    # rung 3: 8 first stores, then 12 active warp-levels of (ld, ld, st), then thread 0 reads s[0].
    assert rung_block_totals(3) == {"ld_inst": 25, "ld_wavefronts": 25, "st_inst": 20, "st_wavefronts": 20}
    assert rung_block_totals(4) == rung_block_totals(3)
    # rung 5: levels 128 and 64 only (4 + 2 warps), then warp 0 reads two slots.
    assert rung_block_totals(5) == {"ld_inst": 14, "ld_wavefronts": 14, "st_inst": 14, "st_wavefronts": 14}
    two = rung_block_totals(2)
    assert two["ld_inst"] == 25 and two["st_inst"] == 20
    # of the 141 tree wavefronts, 94 are loads and 47 stores (test_reduction_trees_by_hand)
    assert two["ld_wavefronts"] == 94 + 1 and two["st_wavefronts"] == 47 + 8
    with pytest.raises(ValueError, match="no shared-memory tree"):
        rung_block_totals(6)


def test_row_starts_and_vector_chunks():
    # Pitch 33: row i starts at byte 132 i, 16-byte aligned only when i % 4 == 0.
    assert [i for i in range(32) if TILE_32x33.row_start(i) % 16 == 0] == list(range(0, 32, 4))
    # The swizzled tile keeps a pitch of 32 floats: every row starts on a 128-byte boundary,
    # although logical element (i, 0) is stored at column i, not at the row's start.
    assert all(TILE_SWIZZLED.row_start(i) % 128 == 0 for i in range(32))
    assert TILE_SWIZZLED.address(5, 0) == TILE_SWIZZLED.row_start(5) + 4 * 5
    # A 16-byte chunk of a swizzled row holds one logical group of four, permuted by i % 4.
    assert TILE_SWIZZLED.chunk_elements(0, 0) == [0, 1, 2, 3]
    assert TILE_SWIZZLED.chunk_elements(4, 0) == [4, 5, 6, 7]
    assert TILE_SWIZZLED.chunk_elements(5, 0) == [5, 4, 7, 6]
    assert TILE_32x32.chunk_elements(5, 1) == [4, 5, 6, 7]


TREES = ("interleaved_divergent", "interleaved_strided", "sequential")


@pytest.mark.parametrize("kind", TREES)
@pytest.mark.parametrize("n", [0, 1, 37, 255, 256])
def test_tree_reduce_sums_and_maximizes_like_python(kind, n):
    rng = random.Random(n)
    ints = [rng.randrange(-10**6, 10**6) for _ in range(n)]
    assert tree_reduce(ints, operator.add, 0, kind) == sum(ints)  # integers: exact in any order
    floats = [-rng.uniform(1, 100) for _ in range(n)]
    assert tree_reduce(floats, max, -math.inf, kind) == max(floats, default=-math.inf)


@pytest.mark.parametrize("kind", TREES)
def test_a_pad_that_is_not_the_identity_shows(kind):
    values = [-3.0] * 200  # a partial block of negative values
    assert tree_reduce(values, max, 0.0, kind) == 0.0  # Lab 04's exercise: 0 is not max's identity
    assert tree_reduce(values, max, -math.inf, kind) == -3.0
    assert tree_reduce([1] * 200, operator.add, 1, kind) == 256  # 56 padded slots of 1 each


def bit_reversed(i: int, bits: int) -> int:
    return int(format(i, f"0{bits}b")[::-1], 2)


@pytest.mark.parametrize("block", [2, 8, 64, 256])
def test_tree_reduce_combines_in_the_order_of_its_tree(block):
    # String concatenation is associative but not commutative, so the result spells out the
    # order in which the slots were combined. The interleaved trees add neighbours first and keep
    # slot order; the sequential tree adds slot t + block/2 to t first, which reads the slots in
    # bit-reversed order (block 8: 0 4 2 6 1 5 3 7).
    values = [f"{i}," for i in range(block)]
    in_order = "".join(values)
    bits = block.bit_length() - 1
    reversed_order = "".join(f"{bit_reversed(i, bits)}," for i in range(block))
    for kind in ("interleaved_divergent", "interleaved_strided"):
        assert tree_reduce(values, operator.add, "", kind, block) == in_order
    assert tree_reduce(values, operator.add, "", "sequential", block) == reversed_order
    if block == 8:
        assert reversed_order == "0,4,2,6,1,5,3,7,"


def test_tree_reduce_refuses_more_values_than_slots_and_unknown_trees():
    with pytest.raises(ValueError, match="257 values do not fit in a block of 256"):
        tree_reduce([0] * 257, operator.add, 0)
    with pytest.raises(ValueError, match="do not fit in a block of 64"):
        tree_reduce([0] * 65, operator.add, 0, "sequential", 64)
    with pytest.raises(ValueError, match="unknown tree"):
        tree_reduce([1, 2], operator.add, 0, "spiral")
