"""The SM probe builds without a GPU, its SASS holds the convergence barriers, and the residency
count agrees with a brute-force count of overlapping lifetimes."""

from __future__ import annotations

import random
import shutil

import pytest

from infralens.gpuarch import sm_probe as sp
from infralens.tools import nvcc as nvcc_tools
from tests.gpuarch.fakes import FakeSMProbe

needs_nvcc = pytest.mark.skipif(nvcc_tools.find_nvcc() is None, reason="needs nvcc")
needs_cuobjdump = pytest.mark.skipif(shutil.which("cuobjdump") is None, reason="needs cuobjdump")


def _brute_force(blocks):
    """Most blocks alive at one instant, per SM: check every start time (a maximum of overlapping
    half-open intervals is reached at some interval's start)."""
    out = {}
    for sm in {b[0] for b in blocks}:
        mine = [(s, e) for k, s, e in blocks if k == sm]
        out[sm] = max(sum(1 for s, e in mine if s <= t < e) for t, _ in mine)
    return out


def test_max_concurrent_matches_a_brute_force_count():
    rng = random.Random(7)
    for _ in range(50):
        blocks = []
        for _ in range(rng.randint(1, 40)):
            start = rng.randint(0, 100)
            blocks.append((rng.randint(0, 3), start, start + rng.randint(1, 30)))
        assert sp.max_concurrent(blocks) == _brute_force(blocks)


def test_blocks_that_touch_do_not_overlap():
    # One block ends exactly when the next starts: they were never resident together.
    assert sp.max_concurrent([(0, 0, 10), (0, 10, 20), (0, 20, 30)]) == {0: 1}
    assert sp.max_concurrent([(5, 0, 10), (5, 9, 20)]) == {5: 2}
    with pytest.raises(ValueError):
        sp.max_concurrent([(0, 10, 5)])


def test_convergence_ops_are_read_from_sass_text():
    sass = """
        Function : other
        /*0000*/                   BSSY B1, 0x40 ;
        Function : sm_divergent
        /*0030*/                   BSSY B0, 0xf0 ;
        /*00e0*/                   BSYNC B0 ;
        /*0100*/                   WARPSYNC 0xffffffff ;
        /*0240*/                   BSYNC.RECONVERGENT B0 ;
        /*0250*/                   SHFL.BFLY PT, R7, R0, 0x1, 0x1f ;
    """
    assert sp.parse_convergence_ops(sass, "sm_divergent") == [
        "BSSY B0", "BSYNC B0", "WARPSYNC", "BSYNC.RECONVERGENT B0"]
    with pytest.raises(ValueError):
        sp.parse_convergence_ops(sass, "missing")


@needs_nvcc
def test_probe_builds_and_reports_cuda_errors_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path))
    built = nvcc_tools.build(sp.SOURCE, ("sm_90",))
    names = {r.kernel for r in built.resources_for("sm_90")}
    assert {"sm_divergent", "sm_ffma_chain", "sm_resident"} <= names
    probe = sp.SMProbe(built.library)
    try:
        probe.ffma_cycles(32, 64)
    except sp.ProbeError as err:  # no GPU here: the runtime's message comes through
        assert "error" in str(err)
    with pytest.raises(ValueError):
        sp.build("90")


@needs_nvcc
@needs_cuobjdump
def test_the_compiler_brackets_the_branch_with_a_convergence_barrier():
    ops = sp.convergence_barriers("sm_90")
    assert ops is not None and "BSSY B0" in ops and "BSYNC B0" in ops
    assert ops.index("BSSY B0") < ops.index("BSYNC B0")


def test_measurements_need_a_probe_that_answers():
    class Fake:
        def ffma_cycles(self, threads, steps):
            return steps * 4 * max(1, threads // 32 // 16)  # 4-cycle chains, 16 warps saturate

        def resident(self, grid, threads, dyn, spin_ns):
            per_sm = 3
            return [(i % 10, (i // (10 * per_sm)) * 100, (i // (10 * per_sm)) * 100 + 100)
                    for i in range(grid)]

    rows = sp.measure_ffma_issue(Fake(), (1, 4, 16))
    assert [r["cycles_per_fma"] for r in rows] == [4, 4, 4]
    assert rows[1]["warp_ffma_per_clock"] == pytest.approx(1.0)
    res = sp.measure_residency(Fake(), 256, 0, sms=10, blocks_per_sm=3)
    assert res["grid"] == 60 and res["sms_seen"] == 10
    assert res["max_resident_min"] == res["max_resident_max"] == 3


def test_residency_check_compares_the_calculator_with_what_was_seen():
    # A fake GPU that holds exactly what the calculator allows: the check must report agreement,
    # and the calculator's answers must follow the block size and the shared memory.
    rows = sp.check_residency(FakeSMProbe(sms=4), ((1024, 0), (32, 0), (256, 100 * 1024)), sms=4)
    assert [r["calc_blocks"] for r in rows] == [2, 32, 2]   # warp slots, block slots, shared memory
    assert [r["limiters"] for r in rows] == [["warps"], ["blocks"], ["shared memory"]]
    assert all(r["max_resident_min"] == r["max_resident_max"] == r["calc_blocks"] for r in rows)


def test_loop_bodies_follow_backward_branches_only():
    sass = """
        Function : sm_ffma_chain
        /*0100*/                   MOV R2, R3 ;
        /*0110*/                   FFMA R0, R0, R4, R5 ;
        /*0120*/                   FFMA R0, R0, R4, R5 ;
        /*0130*/                   IADD3 R2, R2, -0x2, RZ ;
        /*0140*/                   ISETP.NE.AND P0, PT, R2, RZ, PT ;
        /*0150*/              @P0 BRA 0x110 ;
        /*0160*/              @!P1 BRA 0x190 ;
        /*0170*/                   FFMA R0, R0, R4, R5 ;
        /*0180*/                   EXIT ;
        /*0190*/                   BRA 0x190;
    """
    loops = sp.loop_bodies(sass, "sm_ffma_chain")
    assert loops == [["FFMA", "FFMA", "IADD3", "ISETP.NE.AND", "BRA"], ["BRA"]]  # the last: a trap
    with pytest.raises(ValueError):
        sp.loop_bodies(sass, "missing")


@needs_nvcc
@needs_cuobjdump
def test_the_chain_loop_is_unrolled_sixteen_times():
    mix = sp.ffma_loop_mix("sm_90")
    assert mix is not None and mix["ffma"] == 16 and mix["instructions"] > 16
