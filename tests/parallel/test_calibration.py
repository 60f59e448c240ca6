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
    ddp = latest("lab03-ddp-overlap")
    gpu = next(g for g in GPUS.values() if g.matches(ddp.provenance["gpu"]))
    assert a.nvlink == ddp.results["allreduce_alone"]["busbw"] / (gpu.nvlink_bandwidth_bytes_per_s.value / 2)
    assert set(sources) == {"matmul", "nvlink", "network", "memory_usable", "dp_overlap"}
