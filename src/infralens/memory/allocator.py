"""PyTorch's CUDA caching allocator: its size policy as a model, and its snapshots as data.

``cudaMalloc`` and ``cudaFree`` are slow and synchronizing, so PyTorch asks the driver for large
*segments* and carves them into *blocks* that tensors use. A freed block goes back to a per-stream
free list, not to the driver; ``torch.cuda.memory_reserved`` counts the segments,
``memory_allocated`` the blocks in use. The policy (``c10/cuda/CUDACachingAllocator.cpp`` and
``c10/core/AllocatorConfig.h`` in PyTorch, default settings):

* every request is rounded up to a multiple of :data:`MIN_BLOCK` (512 B);
* requests up to :data:`SMALL_SIZE` (1 MiB) use the *small pool*, whose segments are
  :data:`SMALL_BUFFER` (2 MiB); larger requests use the *large pool*;
* a large-pool request below :data:`MIN_LARGE_ALLOC` (10 MiB) that finds no free block gets a
  :data:`LARGE_BUFFER` (20 MiB) segment; from 10 MiB up, a segment of the request rounded up to
  :data:`ROUND_LARGE` (2 MiB);
* a request takes the smallest free block of its pool and stream that fits (best fit, lowest
  address among equals); the block is split when the rest is at least 512 B (small pool) or more
  than 1 MiB (large pool); a freed block merges with free neighbours of its segment.

:class:`AllocatorModel` replays that policy (one stream, no ``expandable_segments``, no
``max_split_size_mb``); :func:`segments` reads a ``torch.cuda.memory._snapshot()`` into plain
data, so a recorded run can be compared with the model block by block.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from infralens.hardware.specs import MIB

__all__ = ["LARGE_BUFFER", "MIN_BLOCK", "MIN_LARGE_ALLOC", "ROUND_LARGE", "SMALL_BUFFER",
           "SMALL_SIZE", "FRAGMENTING", "AllocatorModel", "Block", "Segment", "from_dicts", "layout",
           "plot_segments", "pool_of", "replay_cuda", "replay_model", "round_size", "segment_size",
           "segments", "summary"]

# [constants-start]
MIN_BLOCK = 512  # kMinBlockSize: every size is rounded up to a multiple of this
SMALL_SIZE = 1 * MIB  # kSmallSize: the largest request served by the small pool
SMALL_BUFFER = 2 * MIB  # kSmallBuffer: the size of a small-pool segment
MIN_LARGE_ALLOC = 10 * MIB  # kMinLargeAlloc: below this, a large request gets a LARGE_BUFFER segment
LARGE_BUFFER = 20 * MIB  # kLargeBuffer (large_segment_size): that segment's size
ROUND_LARGE = 2 * MIB  # kRoundLarge: larger segments are the request rounded up to this
# [constants-end]


# [policy-start]
def round_size(n: int) -> int:
    """The block size a request of ``n`` bytes occupies."""
    if n < 0:
        raise ValueError(f"size must be >= 0, got {n}")
    return max(MIN_BLOCK, -(-n // MIN_BLOCK) * MIN_BLOCK)


def pool_of(n: int) -> str:
    """``'small'`` or ``'large'``: the pool a request of ``n`` bytes (rounded) comes from."""
    return "small" if round_size(n) <= SMALL_SIZE else "large"


def segment_size(n: int) -> int:
    """The size of the segment ``cudaMalloc``'d when no cached block can hold ``n`` bytes."""
    size = round_size(n)
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def _should_split(pool: str, remaining: int) -> bool:
    return remaining >= MIN_BLOCK if pool == "small" else remaining > SMALL_SIZE
# [policy-end]


@dataclass
class Block:
    offset: int  # bytes from the start of its segment
    size: int
    requested: int  # bytes the caller asked for (0 when free)
    free: bool


@dataclass
class Segment:
    address: int  # the model numbers segments 0, 1, 2, ... in creation order; snapshots: device address
    size: int
    pool: str
    blocks: list[Block] = field(default_factory=list)
    expandable: bool = False


class AllocatorModel:
    """The caching allocator's default policy on one stream: malloc, free, and the segments."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []
        self._live: dict[int, tuple[Segment, Block]] = {}
        self._next = 0

    def malloc(self, n: int) -> int:
        """Allocate ``n`` bytes; returns a handle for :meth:`free`."""
        size, pool = round_size(n), pool_of(n)
        fits = [(b.size, seg.address, b.offset, seg, b) for seg in self.segments if seg.pool == pool
                for b in seg.blocks if b.free and b.size >= size]
        if fits:
            *_, seg, blk = min(fits, key=lambda f: f[:3])
        else:
            seg = Segment(len(self.segments), segment_size(n), pool)
            blk = Block(0, seg.size, 0, True)
            seg.blocks.append(blk)
            self.segments.append(seg)
        if _should_split(pool, blk.size - size):
            rest = Block(blk.offset + size, blk.size - size, 0, True)
            blk.size = size
            seg.blocks.insert(seg.blocks.index(blk) + 1, rest)
        blk.free, blk.requested = False, n
        handle = self._next
        self._next += 1
        self._live[handle] = (seg, blk)
        return handle

    def free(self, handle: int) -> None:
        seg, blk = self._live.pop(handle)
        blk.free, blk.requested = True, 0
        i = seg.blocks.index(blk)
        if i + 1 < len(seg.blocks) and seg.blocks[i + 1].free:  # merge with the next block
            blk.size += seg.blocks.pop(i + 1).size
        if i > 0 and seg.blocks[i - 1].free:  # and with the previous one
            prev = seg.blocks[i - 1]
            prev.size += seg.blocks.pop(i).size


# [scenario-start]
FRAGMENTING = (  # (op, name, bytes): a workload whose free memory ends up in pieces
    ("malloc", "x", 256 * MIB), ("free", "x"),  # a large temporary, returned to the cache
    ("malloc", "y1", 100 * MIB), ("malloc", "y2", 100 * MIB),  # both carved from x's segment
    ("free", "y1"),  # a 100 MiB hole at the front, a 56 MiB hole at the back
    ("malloc", "z", 120 * MIB),  # fits neither hole: a new segment
    ("malloc", "m1", 4 * MIB), ("malloc", "m2", 4 * MIB),  # medium: best fit, the 56 MiB hole
    ("malloc", "s1", 300_000), ("malloc", "s2", 300_000), ("free", "s1"),  # small pool
)
# [scenario-end]


def _check_ops(ops) -> None:
    live: set[str] = set()
    for op in ops:
        if op[0] == "malloc" and len(op) == 3 and op[2] >= 0 and op[1] not in live:
            live.add(op[1])
        elif op[0] == "free" and len(op) == 2 and op[1] in live:
            live.remove(op[1])
        else:
            raise ValueError(f"bad allocator op {op!r}")


def replay_model(ops=FRAGMENTING) -> list[Segment]:
    """The segments :class:`AllocatorModel` predicts after ``ops``."""
    _check_ops(ops)
    m, handles = AllocatorModel(), {}
    for op in ops:
        if op[0] == "malloc":
            handles[op[1]] = m.malloc(op[2])
        else:
            m.free(handles.pop(op[1]))
    return m.segments


def replay_cuda(ops=FRAGMENTING, device: str = "cuda") -> dict:
    """Run ``ops`` on the real allocator from an empty cache; return its snapshot.

    Each malloc is a ``torch.empty`` of that many bytes (uint8), so the request is exact. The
    allocator's other users are kept out: the cache is emptied first and nothing else runs.
    """
    import torch

    _check_ops(ops)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    live: dict[str, torch.Tensor] = {}
    for op in ops:
        if op[0] == "malloc":
            live[op[1]] = torch.empty(op[2], dtype=torch.uint8, device=device)
        else:
            del live[op[1]]
    torch.cuda.synchronize(device)
    snap = torch.cuda.memory._snapshot()
    live.clear()
    torch.cuda.empty_cache()
    return snap


def segments(snapshot: dict) -> list[Segment]:
    """The segments of a ``torch.cuda.memory._snapshot()``, blocks in address order."""
    out = []
    for s in sorted(snapshot["segments"], key=lambda s: s["address"]):
        blocks = []
        for b in s["blocks"]:
            used = b["state"] != "inactive"
            blocks.append(Block(b["address"] - s["address"], b["size"],
                                b.get("requested_size", b["size"]) if used else 0, not used))
        blocks.sort(key=lambda b: b.offset)
        out.append(Segment(s["address"], s["total_size"], s["segment_type"], blocks,
                           bool(s.get("is_expandable", False))))
    return out


def from_dicts(rows: list[dict]) -> list[Segment]:
    """Segments back from ``dataclasses.asdict`` form (as a GPU record stores them)."""
    return [Segment(**{**r, "blocks": [Block(**b) for b in r["blocks"]]}) for r in rows]


def layout(segs: list[Segment]) -> list[tuple]:
    """What the policy decides, without addresses: per segment its pool, size and blocks
    (offset, size, free), segments sorted, so a model and a snapshot can be compared."""
    return sorted((s.pool, s.size, tuple((b.offset, b.size, b.free) for b in s.blocks)) for s in segs)


def summary(segs: list[Segment]) -> dict[str, int | float]:
    """Reserved, allocated and free-in-cache bytes; the largest free block; external fragmentation.

    Fragmentation is 1 − largest free block / all free bytes: 0 when the cached free memory is
    one block, near 1 when it is scattered in pieces no large request can use.
    """
    reserved = sum(s.size for s in segs)
    allocated = sum(b.size for s in segs for b in s.blocks if not b.free)
    requested = sum(b.requested for s in segs for b in s.blocks if not b.free)
    free = [b.size for s in segs for b in s.blocks if b.free]
    largest = max(free, default=0)
    return {"reserved": reserved, "allocated": allocated, "requested": requested,
            "free": sum(free), "largest_free": largest,
            "fragmentation": 1 - largest / sum(free) if free else 0.0}


def plot_segments(segs: list[Segment], ax, title: str = "") -> None:
    """One bar per segment, blocks in use filled and free blocks hatched, in MiB."""
    for row, seg in enumerate(segs):
        for b in seg.blocks:
            ax.barh(row, b.size / MIB, left=b.offset / MIB, height=0.6,
                    color="white" if b.free else "tab:blue", edgecolor="black", linewidth=0.6,
                    hatch="//" if b.free else None)
    ax.set_yticks(range(len(segs)),
                  [f"{s.pool} {s.size / MIB:g} MiB" + (" (exp.)" if s.expandable else "") for s in segs])
    ax.invert_yaxis()
    ax.set_xlabel("offset in segment (MiB)")
    if title:
        ax.set_title(title)
