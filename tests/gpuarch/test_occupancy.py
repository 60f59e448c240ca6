"""The occupancy calculator against cases derived by hand (each derivation in the comment), and
against NVIDIA's own calculator, cuda_occupancy.h, on thousands of random kernels."""

from __future__ import annotations

import ctypes
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from infralens.gpuarch.occupancy import (
    RULES,
    SUPPORTED,
    Kernel,
    carveout_bytes,
    max_registers_for,
    max_smem_ignoring_reserve,
    max_static_smem_for,
    occupancy,
    smem_blocks_ignoring_reserve,
    sweep_registers,
    sweep_smem,
)
from infralens.hardware import CC_LIMITS, GPUS, KIB

H100 = GPUS["h100"].compute_capability
A100 = GPUS["a100"].compute_capability


def test_supported_capabilities_are_the_data_center_parts():
    assert set(SUPPORTED) == {(8, 0), (9, 0)}
    assert H100 == (9, 0) and A100 == (8, 0)


def test_rules_cite_their_sources():
    for rules in RULES.values():
        for name in ("register_allocation_unit", "sub_partitions", "smem_allocation_unit",
                     "smem_reserved_per_block", "smem_carveouts"):
            assert getattr(rules, name).source in {"nvidia2025occupancy", "nvidiacudaguide"}, name


def test_reserved_smem_is_the_gap_between_sm_and_block_maxima():
    # hardware.py: 228 KiB per SM, 227 KiB per block. The gap is the per-block reserve.
    for cc in SUPPORTED:
        sm, rules = CC_LIMITS[cc], RULES[cc]
        gap = sm.smem_per_sm_bytes.value - sm.smem_per_block_max_bytes.value
        assert gap == rules.smem_reserved_per_block.value == KIB
        assert rules.smem_carveouts.value[-1] == sm.smem_per_sm_bytes.value


def test_elementwise_kernel_is_warp_limited():
    # 256 threads = 8 warps -> 64 / 8 = 8 blocks. Registers: 16 x 32 = 512 per warp; 16384 / 512
    # = 32 warps per sub-partition -> 128 -> 16 blocks. Shared memory: 1 KiB reserve only -> 228.
    occ = occupancy(Kernel(256, 16), H100)
    assert occ.blocks_per_sm == 8 and occ.limiter == "warps"
    assert occ.limits["registers"] == 16 and occ.limits["shared memory"] == 228
    assert occ.occupancy == 1.0


def test_one_warp_blocks_are_limited_by_block_slots():
    # 32 threads: 64 warp slots would allow 64 blocks, but an SM holds at most 32 blocks: 50 %.
    occ = occupancy(Kernel(32, 16), H100)
    assert occ.blocks_per_sm == 32 and occ.limiters == ("blocks",)
    assert occ.occupancy == 0.5


def test_register_heavy_kernel():
    # 128 regs x 32 = 4096 per warp; 16384 / 4096 = 4 warps per sub-partition -> 16 warps ->
    # 2 blocks of 8 warps: 25 %.
    occ = occupancy(Kernel(256, 128, static_smem_bytes=8192), H100)
    assert occ.blocks_per_sm == 2 and occ.limiter == "registers" and occ.occupancy == 0.25


def test_register_rounding_to_the_allocation_unit():
    # 33 regs x 32 = 1056 -> rounded to 1280 (5 x 256), the same as 40 registers.
    a = occupancy(Kernel(128, 33), H100)
    b = occupancy(Kernel(128, 40), H100)
    assert a.registers_per_warp == b.registers_per_warp == 1280
    assert a.blocks_per_sm == b.blocks_per_sm == 12  # 16384 // 1280 = 12 per part -> 48 warps / 4


def test_sub_partitions_matter_when_blocks_are_not_multiples_of_four_warps():
    # 40 regs, 64-thread blocks (2 warps). Whole SM: 65536 / (1280 x 2) = 25.6 -> 25 blocks.
    # Per sub-partition: 12 warps each, 48 in all -> 24 blocks. The hardware gives 24.
    occ = occupancy(Kernel(64, 40), H100)
    assert 65536 // (1280 * 2) == 25
    assert occ.limits["registers"] == 24


def test_too_many_registers_for_the_block_cannot_launch():
    # 128 regs x 1024 threads = 131072 > 65536 registers per block.
    occ = occupancy(Kernel(1024, 128), H100)
    assert occ.blocks_per_sm == 0 and occ.invalid and "per block" in occ.invalid
    # 64 registers is the most a 1024-thread block may use: 2048 x 32 warps = 65536.
    assert occupancy(Kernel(1024, 64), H100).blocks_per_sm == 1
    assert occupancy(Kernel(1024, 65), H100).blocks_per_sm == 0


def test_shared_memory_reserve_costs_a_block():
    # 76 KiB x 3 = 228 KiB would fill the SM exactly, but each block also holds the 1 KiB reserve:
    # 77 KiB x 3 = 231 KiB > 228 KiB -> 2 blocks. 75 KiB + 1 KiB = 76 KiB -> 3 blocks.
    opt = 227 * KIB
    at76 = occupancy(Kernel(256, 32, dynamic_smem_bytes=76 * KIB, max_dynamic_smem_bytes=opt), H100)
    at75 = occupancy(Kernel(256, 32, dynamic_smem_bytes=75 * KIB, max_dynamic_smem_bytes=opt), H100)
    assert (at76.blocks_per_sm, at76.limiter) == (2, "shared memory")
    assert at75.blocks_per_sm == 3


def test_shared_memory_rounds_to_128_bytes():
    # 4224 + 1024 = 5248 = 41 x 128 (no rounding); 4225 + 1024 rounds up to 5376.
    assert occupancy(Kernel(256, 16, static_smem_bytes=4224), H100).smem_per_block == 5248
    assert occupancy(Kernel(256, 16, static_smem_bytes=4225), H100).smem_per_block == 5376


def test_dynamic_smem_above_48_kib_needs_the_opt_in():
    k = Kernel(256, 32, dynamic_smem_bytes=64 * KIB)
    occ = occupancy(k, H100)
    assert occ.blocks_per_sm == 0 and "opt in" in occ.invalid
    k = Kernel(256, 32, dynamic_smem_bytes=64 * KIB, max_dynamic_smem_bytes=227 * KIB)
    assert occupancy(k, H100).blocks_per_sm == 3  # 228 // 65
    with pytest.raises(ValueError):  # static + max dynamic beyond 227 KiB is refused
        occupancy(Kernel(256, 32, static_smem_bytes=1024, max_dynamic_smem_bytes=227 * KIB), H100)


def test_a100_has_less_shared_memory():
    # 64 KiB + 1 KiB per block: 164 KiB // 65 KiB = 2 on the A100, 228 // 65 = 3 on the H100.
    k = Kernel(128, 32, dynamic_smem_bytes=64 * KIB, max_dynamic_smem_bytes=163 * KIB)
    assert occupancy(k, A100).blocks_per_sm == 2
    assert occupancy(k, H100).blocks_per_sm == 3


def test_carveout_preference():
    # 50 % of 228 KiB = 114 KiB -> the next supported capacity, 132 KiB. 41 KiB blocks: 3 fit.
    k = Kernel(256, 16, dynamic_smem_bytes=40 * KIB)
    assert carveout_bytes(114 * KIB) == 132 * KIB
    assert occupancy(k, H100).blocks_per_sm == 5            # 228 // 41
    assert occupancy(k, H100, carveout_percent=50).blocks_per_sm == 3
    # A preference smaller than one block is overridden: 0 % still runs one 41 KiB block per
    # 64 KiB carveout (the smallest capacity that holds it).
    assert occupancy(k, H100, carveout_percent=0).blocks_per_sm == 1


def test_hopper_barrier_limit():
    # 64 barriers per SM on CC 9.0: 16 named barriers per block -> 4 blocks. Not on CC 8.0.
    k = Kernel(128, 16, barriers=16)
    assert occupancy(k, H100).limits["barriers"] == 4
    assert occupancy(k, H100).blocks_per_sm == 4
    assert "barriers" not in occupancy(k, A100).limits


def test_launch_bounds_budget():
    # __launch_bounds__(256, 3): 85 registers is the naive 65536 / 768, but 85 x 32 rounds to
    # 2816 per warp -> 5 warps per sub-partition -> 2 blocks. 80 x 32 = 2560 -> 6 -> 3 blocks.
    assert max_registers_for(256, 3, H100) == 80
    assert max_registers_for(256, 2, H100) == 128
    assert max_registers_for(1024, 1, H100) == 64
    assert max_registers_for(128, 16, H100) == 32
    assert max_registers_for(1024, 3, H100) == 0  # 3 x 32 warps > 64 warp slots


def test_explain_names_the_limit():
    text = occupancy(Kernel(256, 128, name="sgemm"), H100).explain()
    assert "sgemm" in text and "registers" in text and "<- limit" in text and "25.0%" in text


def test_sweeps_are_monotone():
    regs = sweep_registers(256, range(8, 256, 8))
    assert all(a[1] >= b[1] for a, b in zip(regs, regs[1:], strict=False))
    smem = sweep_smem(256, range(0, 200 * KIB, 4 * KIB))
    assert all(a[1] >= b[1] for a, b in zip(smem, smem[1:], strict=False))


def test_rejects_nonsense():
    with pytest.raises(ValueError):
        Kernel(0, 32)
    with pytest.raises(ValueError):
        Kernel(128, -1)
    with pytest.raises(ValueError):
        occupancy(Kernel(128, 32), (7, 5))


def test_static_tile_budget_by_hand():
    # 5 blocks of 256 threads, 16 registers on an H100: 228 KiB / 5 = 46,694 B per block, rounded
    # down to 128 B: 46,592 B, of which 1 KiB is the driver's reserve: 45,568 B for the tile.
    assert max_static_smem_for(256, 5, 16, H100) == 46_592 - KIB == 45_568
    assert occupancy(Kernel(256, 16, static_smem_bytes=45_568), H100).blocks_per_sm == 5
    assert occupancy(Kernel(256, 16, static_smem_bytes=45_568 + 1), H100).blocks_per_sm == 4
    # 8 blocks: 233,472 / 8 = 29,184 B (a multiple of 128) less the reserve.
    assert max_static_smem_for(256, 8, 16, H100) == 29_184 - KIB
    # One or two blocks could have more, but a static allocation stops at 48 KiB (CUDA guide).
    assert max_static_smem_for(256, 1, 16, H100) == max_static_smem_for(256, 2, 16, A100) == 48 * KIB
    # A100, 4 blocks: 164 KiB / 4 = 41,984 B (a multiple of 128), less the reserve.
    assert max_static_smem_for(128, 4, 32, A100) == 41_984 - KIB
    with pytest.raises(ValueError, match="blocks_per_sm must be a positive integer, got 0"):
        max_static_smem_for(256, 0, 16, H100)


def test_static_tile_budget_is_zero_when_another_resource_binds():
    assert max_static_smem_for(1024, 3, 16, H100) == 0  # 3 x 32 warps > 64 warp slots
    assert max_static_smem_for(256, 3, 128, H100) == 0  # 128 registers: 2 blocks at most
    assert max_static_smem_for(32, 33, 16, H100) == 0  # 32 block slots
    with pytest.raises(ValueError, match="not covered"):
        max_static_smem_for(256, 2, 32, (7, 5))


def test_forgetting_the_reserve_promises_a_block_too_many():
    # 76 KiB blocks: 228 // 76 = 3 if the 1 KiB reserve is forgotten; the SM holds 2 (77 KiB each).
    assert smem_blocks_ignoring_reserve(76 * KIB, H100) == 3
    opt_in = 227 * KIB
    k = Kernel(256, 32, dynamic_smem_bytes=76 * KIB, max_dynamic_smem_bytes=opt_in)
    assert occupancy(k, H100).limits["shared memory"] == 2
    # 1 byte still takes a 128-byte unit: 233,472 / 128 = 1,824; A100: 167,936 / 128 = 1,312.
    assert smem_blocks_ignoring_reserve(1, H100) == smem_blocks_ignoring_reserve(128, H100) == 1824
    assert smem_blocks_ignoring_reserve(129, H100) == 233_472 // 256
    assert smem_blocks_ignoring_reserve(1, A100) == 1312
    # The forgotten reserve is exactly 1 KiB per block: the naive budget is the true one + 1 KiB.
    for blocks in (5, 8, 12):  # tiles under the 48 KiB static cap
        assert max_smem_ignoring_reserve(blocks, H100) == max_static_smem_for(128, blocks, 16, H100) + KIB
    assert max_smem_ignoring_reserve(1, H100) == 228 * KIB  # more than a block may ever have
    assert max_smem_ignoring_reserve(1, H100) > CC_LIMITS[H100].smem_per_block_max_bytes.value
    assert max_smem_ignoring_reserve(3, A100) == 167_936 // 3 // 128 * 128 == 55_936


@pytest.mark.parametrize("fn, bad", [(smem_blocks_ignoring_reserve, 0),
                                     (smem_blocks_ignoring_reserve, -128),
                                     (max_smem_ignoring_reserve, 0), (max_smem_ignoring_reserve, -1)])
def test_naive_helpers_refuse_nonsense_before_any_work(fn, bad):
    with pytest.raises(ValueError, match="must be >= 1") as err:
        fn(bad, (7, 5))  # the argument is checked before the compute capability
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="not covered"):
        fn(1, (7, 5))


# --- against NVIDIA's own calculator --------------------------------------------------------------
#
# The calculator against NVIDIA's own: cuda_occupancy.h, compiled for the host.
#
# ``cuda_occupancy.h`` is the header-only occupancy calculator of the CUDA toolkit (Triton's wheel
# ships a copy too). Built into a small shared library, it answers the same question as
# ``occupancy()`` for thousands of random kernels, on a machine without a GPU. Skipped when no host
# C++ compiler or header is found.

HERE = Path(__file__).resolve().parent
INT_MAX = 2**31 - 1


def _header_dir() -> Path | None:
    candidates = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    try:
        import triton

        candidates.append(Path(triton.__file__).parent / "backends" / "nvidia" / "include")
    except ImportError:
        pass
    return next((c for c in candidates if (c / "cuda_occupancy.h").is_file()), None)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    cxx = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    include = _header_dir()
    if cxx is None or include is None:
        pytest.skip("needs a host C++ compiler and cuda_occupancy.h")
    out = tmp_path_factory.mktemp("occref") / "occref.so"
    subprocess.run([cxx, "-O1", "-shared", "-fPIC", f"-I{include}", str(HERE / "occ_reference.cpp"),
                    "-o", str(out)], check=True, capture_output=True)
    lib = ctypes.CDLL(str(out))
    fn = lib.ref_max_active_blocks
    fn.restype = ctypes.c_int
    fn.argtypes = ([ctypes.c_int] * 7 + [ctypes.c_longlong] * 4 + [ctypes.c_int, ctypes.c_longlong,
                   ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_longlong,
                   ctypes.c_int, ctypes.POINTER(ctypes.c_int)])
    return fn


def _reference_blocks(fn, k: Kernel, cc, carveout: int):
    sm, rules = CC_LIMITS[cc], RULES[cc]
    max_dyn = (rules.smem_per_block_default.value - k.static_smem_bytes
               if k.max_dynamic_smem_bytes is None else k.max_dynamic_smem_bytes)
    limits = (ctypes.c_int * 5)()
    blocks = fn(cc[0], cc[1], rules.max_threads_per_block.value, sm.max_threads_per_sm.value,
                rules.registers_per_block.value, sm.registers_per_sm.value, sm.warp_size.value,
                rules.smem_per_block_default.value, sm.smem_per_sm_bytes.value,
                sm.smem_per_block_max_bytes.value, rules.smem_reserved_per_block.value,
                k.registers_per_thread, k.static_smem_bytes, max_dyn, 1, k.barriers,
                k.threads_per_block, k.dynamic_smem_bytes, carveout, limits)
    assert blocks >= 0, f"cuda_occupancy.h rejected the input ({blocks})"
    return blocks, dict(zip(("registers", "shared memory", "warps", "blocks", "barriers"), limits,
                            strict=True))


def _random_kernel(rng: random.Random, cc) -> tuple[Kernel, int]:
    sm = CC_LIMITS[cc]
    optin_max = sm.smem_per_block_max_bytes.value
    static = rng.choice([0, 0, 4224, 8192, rng.randrange(0, 48 * 1024 + 1, 4)])
    if rng.random() < 0.5:
        max_dyn = None
        dyn_cap = 48 * 1024 - static
    else:
        max_dyn = rng.randrange(0, optin_max - static + 1, 4)
        dyn_cap = max_dyn
    dyn = rng.choice([0, rng.randrange(0, dyn_cap + 1, 4) if dyn_cap > 0 else 0,
                      dyn_cap + 4 * rng.randrange(0, 3)])  # sometimes past the kernel's maximum
    k = Kernel(threads_per_block=rng.choice([32, 64, 96, 128, 160, 256, 384, 512, 768, 1024,
                                             rng.randrange(1, 1025), 1056]),
               registers_per_thread=rng.choice([0, 16, 32, 40, 64, 80, 128, 168, 255,
                                                rng.randrange(1, 256)]),
               static_smem_bytes=static, dynamic_smem_bytes=dyn, max_dynamic_smem_bytes=max_dyn,
               barriers=rng.choice([0, 1, 1, 2, 3, 16]))
    carveout = rng.choice([-1, -1, 0, 25, 50, 100, rng.randrange(0, 101)])
    return k, carveout


@pytest.mark.parametrize("cc", sorted(RULES))
def test_matches_cuda_occupancy_h_on_random_kernels(reference, cc):
    rng = random.Random(20261121 + cc[0])
    for _ in range(4000):
        k, carveout = _random_kernel(rng, cc)
        want, want_limits = _reference_blocks(reference, k, cc, carveout)
        got = occupancy(k, cc, carveout_percent=None if carveout < 0 else carveout)
        assert got.blocks_per_sm == want, (k, carveout, got.explain(), want_limits)
        if got.invalid:
            continue
        for name, value in got.limits.items():
            assert value == want_limits[name], (name, k, carveout, want_limits)


def test_reference_is_built_from_the_header_not_from_us(reference):
    # Guard against a tautology: the shim links nothing from infralens.
    assert "infralens" not in (HERE / "occ_reference.cpp").read_text()
    assert sys.modules.get("infralens.gpuarch.occupancy") is not None


def _reference_smem_limit(fn, cc, smem_per_block: int, reserved: int) -> int:
    """cuda_occupancy.h's shared-memory limit for one block size, with the given reserve."""
    sm, rules = CC_LIMITS[cc], RULES[cc]
    optin = sm.smem_per_block_max_bytes.value
    limits = (ctypes.c_int * 5)()
    blocks = fn(cc[0], cc[1], rules.max_threads_per_block.value, sm.max_threads_per_sm.value,
                rules.registers_per_block.value, sm.registers_per_sm.value, sm.warp_size.value,
                rules.smem_per_block_default.value, sm.smem_per_sm_bytes.value, optin, reserved,
                16, 0, optin, 1, 1, 32, smem_per_block, -1, limits)
    assert blocks >= 0
    return limits[1]


@pytest.mark.parametrize("cc", sorted(RULES))
def test_ignoring_the_reserve_is_nvidias_calculator_with_no_reserve(reference, cc):
    # cuda_occupancy.h told the device reserves nothing per block gives the naive count; told the
    # real 1 KiB, the true one, which occupancy() matches.
    rng = random.Random(7 + cc[0])
    sizes = [1, 127, 128, 129, 1024, 48 * KIB, 76 * KIB, 100 * KIB, 160 * KIB]
    sizes += [rng.randrange(1, 160 * KIB) for _ in range(200)]
    for size in sizes:
        assert smem_blocks_ignoring_reserve(size, cc) == _reference_smem_limit(reference, cc, size, 0), size


@pytest.mark.parametrize("cc", sorted(RULES))
def test_static_tile_budget_is_the_largest_tile_nvidias_calculator_admits(reference, cc):
    # The largest static tile (128-byte steps, at most 48 KiB) with which cuda_occupancy.h still
    # reports `blocks` resident blocks, found here by asking it about every tile.
    def ref_blocks(threads, regs, tile):
        return _reference_blocks(reference, Kernel(threads, regs, static_smem_bytes=tile), cc, -1)[0]

    for threads, blocks, regs in [(256, 5, 16), (256, 8, 16), (128, 4, 32), (128, 10, 32),
                                  (512, 2, 32), (64, 20, 16), (1024, 1, 32), (1024, 2, 32),
                                  (256, 3, 128), (96, 13, 40)]:
        want = max((t for t in range(128, 48 * KIB + 1, 128) if ref_blocks(threads, regs, t) >= blocks),
                   default=0)
        assert max_static_smem_for(threads, blocks, regs, cc) == want, (threads, blocks, regs)
        # the naive budget drops the reserve (and the 48 KiB cap)
        naive = max_smem_ignoring_reserve(blocks, cc)
        assert naive // 128 * 128 == naive
        assert naive >= want and (want == 0 or want == 48 * KIB or naive == want + KIB)
