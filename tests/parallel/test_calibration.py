"""The calibrated assumptions read the records they name."""

from infralens.hardware import GPUS
from infralens.parallel.calibration import calibrated_assumptions
from infralens.tools.cells.records import latest


def test_calibration_reads_the_records():
    a, sources = calibrated_assumptions()
    roof = latest("ch01-roofline")
    gpu = next(g for g in GPUS.values() if g.matches(roof.provenance["gpu"]))
    assert a.matmul == roof.results["matmul"]["flops_per_s"] / gpu.dense_bf16_flops.value
    assert 0 < a.matmul < 1 and 0 < a.nvlink < 1 and a.network == a.nvlink
    coll = latest("ch06-collectives")
    ring = [r for r in coll.results["runs"]["Ring"]["rows"] if r["op"] == "all_reduce"]
    gpu = next(g for g in GPUS.values() if g.matches(coll.provenance["gpu"]))
    assert a.nvlink == ring[-1]["busbw"] / (gpu.nvlink_bandwidth_bytes_per_s.value / 2)
    assert ring[-1]["bytes"] == max(r["bytes"] for r in ring)
    assert set(sources) == {"matmul", "nvlink", "network", "memory_usable", "dp_overlap"}
