"""A persistent grid sized from the compiled kernel: programs per SM against hand-worked occupancy,
and Lab 06's softmax kernel compiled offline for sm_90 (no GPU needed)."""

import json
import os
import subprocess
import sys

import pytest

from infralens.kernels.persistent_grid import programs_per_sm, supported_cc

pytest.importorskip("triton")


def _by_hand(registers: int, shared: int, warps: int) -> int:
    """CC 9.0 occupancy worked by hand from the allocation rules: 65,536 registers in four
    sub-partitions of 16,384, registers per warp rounded up to 256; 233,472 B of shared memory,
    each block's rounded up to 128 B after a 1 KiB reserve; 64 warps and 32 blocks per SM."""
    per_warp = -(-registers * 32 // 256) * 256
    by_regs = (16_384 // per_warp) * 4 // warps
    by_smem = 233_472 // (-(-(shared + 1024) // 128) * 128)
    return min(by_regs, by_smem, 64 // warps, 32)


@pytest.mark.parametrize("registers, shared, warps", [
    (53, 128, 32),     # Lab 06's fp32 row of 32,768 on the GPU of the record: one program, not two
    (58, 128, 32),     # the same kernel as Triton 3.9 compiles it offline
    (32, 64, 16),      # bf16 rows of 8,192: registers allow 4, warps 4
    (34, 4104, 2),     # bf16 rows of 1,024 with two rows of pipeline buffers: registers bind (24)
    (30, 8208, 4),     # fp32 rows of 1,024: warps and registers both allow 16
    (39, 1024, 1),     # bf16 rows of 256, one warp: the 32-block limit binds
    (40, 100_000, 4),  # large pipeline buffers: shared memory binds (2), with the opt-in
])
def test_programs_per_sm_matches_the_allocation_rules_worked_by_hand(registers, shared, warps):
    assert programs_per_sm(registers, shared, warps) == _by_hand(registers, shared, warps)


def test_the_record_s_fp32_kernel_fits_once_where_warps_alone_allow_two():
    # The finding this module answers: 64 warp slots / 32 warps = 2 programs, but 53 registers
    # x 1,024 threads (1,792 per warp after rounding) leave room for one.
    assert 64 // 32 == 2 and programs_per_sm(53, 128, 32) == 1


def test_a_program_that_cannot_fit_is_refused():
    with pytest.raises(ValueError, match="no program fits"):
        programs_per_sm(255, 0, 32)  # 255 x 1,024 registers > the 65,536 a block may hold
    with pytest.raises(ValueError, match="opt-in maximum"):
        programs_per_sm(32, 300_000, 4)  # more shared memory than one block may have


def test_unsupported_devices_fall_back_to_hopper():
    assert supported_cc(9, 0) == (9, 0) and supported_cc(8, 0) == (8, 0)
    assert supported_cc(12, 0) == (9, 0)


def _cli(*args):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}  # the real compiler
    return subprocess.run([sys.executable, "-W", "ignore", "-m", "infralens.kernels.persistent_grid",
                           *args], capture_output=True, text=True, env=env)


def test_offline_compile_sizes_the_fp32_widest_row_at_one_program_per_sm():
    proc = _cli("--dtype", "fp32", "--block", "32768", "--block", "1024")
    assert proc.returncode == 0, proc.stderr
    wide, narrow = map(json.loads, proc.stdout.splitlines())
    assert (wide["num_warps"], wide["num_stages"], wide["programs_per_sm"]) == (32, 1, 1)
    assert wide["programs_per_sm"] == programs_per_sm(wide["registers"], wide["shared_bytes"], 32)
    # two rows of 1,024 fp32 in the pipeline buffers: Triton's shared memory says so
    assert narrow["num_stages"] == 3 and narrow["shared_bytes"] >= 2 * 1024 * 4
    assert narrow["programs_per_sm"] == programs_per_sm(narrow["registers"], narrow["shared_bytes"], 4)


def test_cli_rejects_bad_input_in_one_line():
    for bad in (("--block", "1000"), ("--block", "0"), ("--dtype", "fp64"), ()):
        proc = _cli(*bad)
        assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1 and not proc.stdout, bad
