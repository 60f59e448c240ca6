"""The caching allocator's policy and model against the rules of PyTorch's
``CUDACachingAllocator.cpp`` (kMinBlockSize 512, kSmallSize 1 MiB, kSmallBuffer 2 MiB,
kMinLargeAlloc 10 MiB, kLargeBuffer 20 MiB, kRoundLarge 2 MiB), and the model's prediction for
the fragmenting workload against the snapshot the allocator produced on an H100."""

from __future__ import annotations

import dataclasses
import itertools
import json
import subprocess
import sys
import textwrap

import pytest
import torch

from infralens.memory import allocator as alloc
from infralens.memory.allocator import (
    FRAGMENTING,
    AllocatorModel,
    Block,
    Segment,
    from_dicts,
    layout,
    plot_segments,
    pool_of,
    replay_model,
    round_size,
    segment_size,
    segments,
    summary,
)
from infralens.tools.glue import record

KIB, MIB = 1024, 1024 * 1024


def test_constants_are_pytorchs():
    assert (alloc.MIN_BLOCK, alloc.SMALL_SIZE, alloc.SMALL_BUFFER) == (512, MIB, 2 * MIB)
    assert (alloc.MIN_LARGE_ALLOC, alloc.LARGE_BUFFER, alloc.ROUND_LARGE) == (10 * MIB, 20 * MIB, 2 * MIB)


# (request, rounded size, pool, segment) worked out by hand from the rules:
# round up to 512; rounded <= 1 MiB: small pool, 2 MiB segment; rounded < 10 MiB: 20 MiB segment;
# else the rounded size rounded up to 2 MiB.
BOUNDARIES = [
    (0, 512, "small", 2 * MIB),
    (1, 512, "small", 2 * MIB),
    (511, 512, "small", 2 * MIB),
    (512, 512, "small", 2 * MIB),
    (513, 1024, "small", 2 * MIB),
    (MIB - 1, MIB, "small", 2 * MIB),
    (MIB, MIB, "small", 2 * MIB),
    (MIB + 1, MIB + 512, "large", 20 * MIB),
    (10 * MIB - 512, 10 * MIB - 512, "large", 20 * MIB),
    (10 * MIB - 513, 10 * MIB - 512, "large", 20 * MIB),
    (10 * MIB - 1, 10 * MIB, "large", 10 * MIB),  # rounds up to 10 MiB first: not below it
    (10 * MIB, 10 * MIB, "large", 10 * MIB),
    (10 * MIB + 1, 10 * MIB + 512, "large", 12 * MIB),
    (12 * MIB, 12 * MIB, "large", 12 * MIB),
    (120 * MIB, 120 * MIB, "large", 120 * MIB),
    (256 * MIB + 1, 256 * MIB + 512, "large", 258 * MIB),
]


@pytest.mark.parametrize("n, rounded, pool, segment", BOUNDARIES)
def test_policy_at_its_boundaries(n, rounded, pool, segment):
    assert round_size(n) == rounded
    assert pool_of(n) == pool
    assert segment_size(n) == segment
    assert segment >= rounded


@pytest.mark.parametrize("fn", [round_size, pool_of, segment_size, AllocatorModel().malloc])
def test_negative_sizes_are_refused(fn):
    with pytest.raises(ValueError, match="size must be >= 0"):
        fn(-1)


# --- the model --------------------------------------------------------------------------------

def blocks(seg: Segment) -> list[tuple[int, int, bool]]:
    return [(b.offset, b.size, b.free) for b in seg.blocks]


def test_first_small_request_splits_a_small_segment():
    m = AllocatorModel()
    m.malloc(1000)
    (seg,) = m.segments
    assert (seg.pool, seg.size) == ("small", 2 * MIB)
    assert blocks(seg) == [(0, 1024, False), (1024, 2 * MIB - 1024, True)]
    assert seg.blocks[0].requested == 1000 and seg.blocks[1].requested == 0


def test_small_pool_splits_any_remainder_of_512():
    m = AllocatorModel()
    m.malloc(MIB)
    m.malloc(MIB - 512)  # leaves exactly 512 B: split
    assert blocks(m.segments[0])[-1] == (2 * MIB - 512, 512, True)
    m.malloc(512)  # takes it exactly
    assert [b.free for b in m.segments[0].blocks] == [False, False, False] and len(m.segments) == 1


@pytest.mark.parametrize("request_size, split", [(19 * MIB, False), (19 * MIB - 512, True)])
def test_large_pool_splits_only_a_remainder_over_1_mib(request_size, split):
    m = AllocatorModel()
    m.malloc(request_size)
    (seg,) = m.segments
    assert seg.size == 20 * MIB
    if split:  # 1 MiB + 512 left: more than 1 MiB
        assert blocks(seg) == [(0, request_size, False), (request_size, MIB + 512, True)]
    else:  # exactly 1 MiB left: kept inside the block
        assert blocks(seg) == [(0, 20 * MIB, False)] and seg.blocks[0].requested == request_size


def test_pools_do_not_share_segments():
    m = AllocatorModel()
    m.malloc(MIB + 1)  # large: a 20 MiB segment with ~19 MiB free
    m.malloc(4 * KIB)  # small: not from that free block
    assert [(s.pool, s.size) for s in m.segments] == [("large", 20 * MIB), ("small", 2 * MIB)]


def carve(m: AllocatorModel, sizes_mib: list[int]) -> None:
    """One 40 MiB segment carved into blocks of ``sizes_mib`` from its start (the rest stays one
    free block), then the 1st, 3rd, 5th ... block freed: holes between live blocks."""
    m.free(m.malloc(40 * MIB))
    handles = [m.malloc(s * MIB) for s in sizes_mib]
    for h in handles[::2]:
        m.free(h)


def test_best_fit_takes_the_smallest_hole_that_fits():
    m = AllocatorModel()
    carve(m, [8, 2, 4, 2, 6, 2])  # free: 8 MiB at 0, 4 at 10, 6 at 16, 16 at 24
    (seg,) = m.segments
    m.malloc(3 * MIB + 5)  # fits all four: the 4 MiB hole; 1 MiB - 512 left, not split off
    taken = next(b for b in seg.blocks if b.requested == 3 * MIB + 5)
    assert (taken.offset, taken.size) == (10 * MIB, 4 * MIB)
    m.malloc(5 * MIB)  # fits 6, 8 and 16: the 6 MiB hole; exactly 1 MiB left, not split off
    taken = next(b for b in seg.blocks if b.requested == 5 * MIB)
    assert (taken.offset, taken.size) == (16 * MIB, 6 * MIB)
    m.malloc(7 * MIB)  # fits 8 and 16: the 8 MiB hole at 0
    assert next(b for b in seg.blocks if b.requested == 7 * MIB).offset == 0


def test_equal_holes_are_taken_lowest_address_first():
    m = AllocatorModel()
    carve(m, [4, 2, 4, 2, 4, 2])  # three 4 MiB holes, at 0, 6 and 12 MiB (and 22 MiB at 18)
    m.malloc(4 * MIB)
    m.malloc(4 * MIB)
    seg = m.segments[0]
    used = sorted(b.offset for b in seg.blocks if not b.free and b.requested == 4 * MIB)
    assert used == [0, 6 * MIB]


def test_free_merges_with_both_neighbours():
    m = AllocatorModel()
    a, b, c = m.malloc(4 * MIB), m.malloc(4 * MIB), m.malloc(4 * MIB)
    (seg,) = m.segments
    assert blocks(seg) == [(0, 4 * MIB, False), (4 * MIB, 4 * MIB, False), (8 * MIB, 4 * MIB, False),
                           (12 * MIB, 8 * MIB, True)]
    m.free(a)
    m.free(c)  # merges with the free tail
    assert blocks(seg) == [(0, 4 * MIB, True), (4 * MIB, 4 * MIB, False), (8 * MIB, 12 * MIB, True)]
    m.free(b)  # merges with the previous and the next block: the segment is one free block again
    assert blocks(seg) == [(0, 20 * MIB, True)]
    assert summary(m.segments)["fragmentation"] == 0.0


def test_a_freed_block_is_reused_before_a_new_segment():
    m = AllocatorModel()
    m.free(m.malloc(8 * MIB))
    m.malloc(8 * MIB)
    assert len(m.segments) == 1


# --- the fragmenting workload -------------------------------------------------------------------

def test_fragmenting_replay_by_hand():
    segs = replay_model(FRAGMENTING)
    small = 300_000 + (-300_000 % 512)  # 300,032: 300,000 rounded up to 512
    assert layout(segs) == sorted([
        # x's 256 MiB segment: y1's hole, y2, m1 and m2 from the back hole, 48 MiB still free
        ("large", 256 * MIB, ((0, 100 * MIB, True), (100 * MIB, 100 * MIB, False),
                              (200 * MIB, 4 * MIB, False), (204 * MIB, 4 * MIB, False),
                              (208 * MIB, 48 * MIB, True))),
        ("large", 120 * MIB, ((0, 120 * MIB, False),)),  # z fits neither hole
        ("small", 2 * MIB, ((0, small, True), (small, small, False), (2 * small, 2 * MIB - 2 * small, True))),
    ])


def test_summary_of_the_workload_by_hand():
    s = summary(replay_model())
    small = 300_032
    assert s["reserved"] == (256 + 120 + 2) * MIB
    assert s["allocated"] == (100 + 120 + 4 + 4) * MIB + small
    assert s["requested"] == (100 + 120 + 4 + 4) * MIB + 300_000
    assert s["free"] == (100 + 48) * MIB + 2 * MIB - small
    assert s["reserved"] == s["allocated"] + s["free"]
    assert s["largest_free"] == 100 * MIB
    assert s["fragmentation"] == pytest.approx(1 - 100 * MIB / s["free"])
    assert summary([]) == {"reserved": 0, "allocated": 0, "requested": 0, "free": 0, "largest_free": 0,
                           "fragmentation": 0.0}


@pytest.mark.parametrize("ops", [
    (("free", "x"),),  # never allocated
    (("malloc", "x", 10), ("malloc", "x", 10)),  # allocated twice while live
    (("malloc", "x", 10), ("free", "x"), ("free", "x")),  # freed twice
    (("malloc", "x", -1),),
    (("malloc", "x"),),
    (("free", "x", 3),),
    (("realloc", "x", 3),),
])
def test_bad_ops_are_refused(ops):
    with pytest.raises(ValueError, match="bad allocator op"):
        replay_model(ops)


def test_a_name_may_be_reused_after_free():
    segs = replay_model((("malloc", "x", 10), ("free", "x"), ("malloc", "x", 20)))
    assert blocks(segs[0])[0] == (0, 512, False) and segs[0].blocks[0].requested == 20


# --- snapshots ----------------------------------------------------------------------------------

def test_segments_reads_a_snapshot():
    base_a, base_b = 0x7F00_0000_0000, 0x7E00_0000_0000
    snap = {"segments": [  # torch.cuda.memory._snapshot()'s format, listed out of address order
        {"address": base_a, "total_size": 20 * MIB, "segment_type": "large", "stream": 0,
         "blocks": [
             {"address": base_a + 4 * MIB, "size": 16 * MIB, "requested_size": 0, "state": "inactive"},
             {"address": base_a, "size": 4 * MIB, "requested_size": 4 * MIB - 100,
              "state": "active_allocated"},
         ]},
        {"address": base_b, "total_size": 2 * MIB, "segment_type": "small", "is_expandable": True,
         "blocks": [
             {"address": base_b, "size": 1024, "state": "active_pending_free"},  # no requested_size
             {"address": base_b + 1024, "size": 2 * MIB - 1024, "requested_size": 7, "state": "inactive"},
         ]},
    ]}
    small, large = segments(snap)
    assert small == Segment(base_b, 2 * MIB, "small",
                            [Block(0, 1024, 1024, False), Block(1024, 2 * MIB - 1024, 0, True)], True)
    assert large == Segment(base_a, 20 * MIB, "large",
                            [Block(0, 4 * MIB, 4 * MIB - 100, False), Block(4 * MIB, 16 * MIB, 0, True)],
                            False)
    assert segments({"segments": []}) == []


def test_from_dicts_inverts_asdict():
    segs = replay_model()
    rows = [dataclasses.asdict(s) for s in segs]
    assert from_dicts(rows) == segs
    assert all(isinstance(b, Block) for s in from_dicts(rows) for b in s.blocks)


@pytest.fixture(scope="module")
def h100_runs() -> dict:
    rec = record("ch04-allocator")
    assert rec.provenance["gpu"].startswith("NVIDIA")
    return rec.results["runs"]


def requested(segs: list[Segment]) -> list[tuple[int, int, int]]:
    return sorted((s.size, b.offset, b.requested) for s in segs for b in s.blocks)


def test_the_h100_snapshot_is_the_models_prediction(h100_runs):
    recorded = from_dicts(h100_runs["default"]["segments"])
    assert layout(recorded) == layout(replay_model(FRAGMENTING))
    assert requested(recorded) == requested(replay_model(FRAGMENTING))  # layout leaves these out
    assert summary(recorded) == summary(replay_model(FRAGMENTING))


def test_the_recorded_runs_are_consistent(h100_runs):
    for name, run in h100_runs.items():
        segs = from_dicts(run["segments"])
        s = summary(segs)
        assert s == run["summary"]
        assert s["reserved"] == s["allocated"] + s["free"]
        for seg in segs:  # blocks tile their segment
            ends = itertools.accumulate(b.size for b in seg.blocks)
            assert [b.offset for b in seg.blocks] == [0, *list(ends)[:-1]]
            assert sum(b.size for b in seg.blocks) == seg.size
            assert seg.expandable == (name == "expandable")
    # expandable segments hold the same tensors in less reserved memory
    assert h100_runs["expandable"]["summary"]["allocated"] == h100_runs["default"]["summary"]["allocated"]
    assert h100_runs["expandable"]["summary"]["reserved"] < h100_runs["default"]["summary"]["reserved"]


# --- the real allocator -------------------------------------------------------------------------

REPLAY_CUDA = textwrap.dedent("""
    import json
    from infralens.memory.allocator import FRAGMENTING, layout, replay_cuda, segments
    print(json.dumps(layout(segments(replay_cuda(FRAGMENTING)))))
""")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_replay_cuda_is_the_models_prediction():
    # in a fresh process: this one's allocator may already hold segments of other tests
    done = subprocess.run([sys.executable, "-c", REPLAY_CUDA], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got == json.loads(json.dumps(layout(replay_model(FRAGMENTING))))


# --- the drawing ----------------------------------------------------------------------------------

def test_plot_segments_draws_one_bar_per_block():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    segs = replay_model()
    fig, ax = plt.subplots()
    try:
        plot_segments(segs, ax, title="fragmenting")
        bars = [p for p in ax.patches if isinstance(p, Rectangle)]
        expected = [(row, b) for row, s in enumerate(segs) for b in s.blocks]
        assert len(bars) == len(expected)
        for bar, (row, b) in zip(bars, expected, strict=True):
            assert bar.get_x() == pytest.approx(b.offset / MIB)
            assert bar.get_width() == pytest.approx(b.size / MIB)
            assert bar.get_y() + bar.get_height() / 2 == pytest.approx(row)
            assert (bar.get_hatch() == "//") == b.free
        labels = [t.get_text() for t in ax.get_yticklabels()]
        assert labels == [f"{s.pool} {s.size // MIB} MiB" for s in segs]
        assert ax.get_title() == "fragmenting" and ax.yaxis_inverted()
    finally:
        plt.close(fig)
