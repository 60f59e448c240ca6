"""The probe builds and loads without a GPU, and its check logic runs against a fake runtime."""

from __future__ import annotations

import shutil

import pytest

from infralens.gpuarch import occupancy_probe as op
from infralens.gpuarch.occupancy import max_registers_for

from .fakes import FakeProbe

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")


def test_every_case_names_a_probe_kernel():
    text = op.SOURCE.read_text()
    for case in op.CASES:
        assert f'{{"{case.kernel}", ' in text, case.kernel


@needs_nvcc
def test_ptxas_report_lists_every_kernel():
    rep = op.ptxas_report("sm_90")
    names = {c.kernel for c in op.CASES}
    assert names <= set(rep)
    assert rep["occ_transpose33"]["smem_bytes"] == 32 * 33 * 4  # the padded tile
    assert rep["occ_sgemm_8x8"]["registers"] > 64  # 64 accumulators and more: register-bound
    # Chapter 1's second worked example takes this number; if a new ptxas changes it, update both.
    assert rep["occ_sgemm_8x8"]["registers"] == 128


@needs_nvcc
def test_launch_bounds_budget_matches_the_compiler():
    # __launch_bounds__(256, 3): the calculator's budget is what ptxas uses once it must spill.
    lb3 = op.ptxas_report("sm_90")["occ_sgemm_8x8_lb3"]
    assert lb3["spill_store_bytes"] > 0
    assert lb3["registers"] == max_registers_for(256, 3, (9, 0))


@needs_nvcc
def test_library_builds_loads_and_reports_cuda_errors_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path))
    probe = op.Probe(op.build("sm_90"))
    assert probe.kernels == ["occ_copy", "occ_reduce_dyn", "occ_transpose33", "occ_sgemm_8x8",
                             "occ_sgemm_8x8_lb3", "occ_stage_dyn"]
    try:
        probe.device_attributes()
    except op.ProbeError as err:  # no GPU here: the runtime's own message comes through
        assert "error" in str(err)
    else:  # pragma: no cover - only on a machine with a GPU
        pass
    with pytest.raises(ValueError):
        probe.func_attributes("no_such_kernel")
    with pytest.raises(ValueError):
        op.build("90")


def test_check_occupancy_runs_every_case_and_restores_attributes():
    fake = FakeProbe()
    before = dict(fake.max_dyn)
    res = op.check_occupancy(fake)
    assert res["total"] == len(op.CASES) == res["matches"]
    assert fake.max_dyn == before and set(fake.carveout.values()) == {-1}
    by = {(r["kernel"], r["block"], r["dynamic_smem"], r["carveout"]): r for r in res["cases"]}
    assert by[("occ_sgemm_8x8", 1024, 0, None)]["api_blocks"] == 0
    assert by[("occ_sgemm_8x8", 1024, 0, None)]["launch_error"] != 0
    assert by[("occ_stage_dyn", 256, 76 * 1024, None)]["calc_blocks"] == 2
    assert by[("occ_copy", 32, 0, None)]["limiter"] == "blocks"
    import json

    json.dumps(res, allow_nan=False)
