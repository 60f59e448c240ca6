"""The planner's default assumptions, calibrated from the book's own GPU records where it can.

* ``matmul``: a large BF16 matmul's achieved FLOP/s over the dense peak, from the record of
  Chapter 1's roofline (``ch01-roofline``: 8192³ on an H100). It is the ceiling for a
  transformer's layers, whose norms, activations and attention run below it: the planner's
  compute time is optimistic, and the Lab 12 page compares its estimates with published runs.
* ``nvlink``: the ring all-reduce's bus bandwidth at the largest size of Chapter 6's collective
  sweep (``ch06-collectives``, every GPU of one node) over the GPU's NVLink bandwidth each way.
* ``network``: no record measures a network between nodes; the NVLink fraction is used, an
  estimate.
* ``memory_usable``: 0.9 of HBM, an estimate of what the CUDA context, NCCL's buffers and the
  allocator's fragmentation leave (Lab 01 measures the context and allocator on one GPU).
* ``dp_overlap``: 0, the gradient reduction is counted as exposed (conservative).
"""

from __future__ import annotations

from pathlib import Path

from infralens.hardware import ALL_GPUS
from infralens.parallel.plan import Assumptions
from infralens.tools.cells.records import latest

#: Estimates (not measured), each explained in the module docstring.
MEMORY_USABLE_ESTIMATE = 0.9
DP_OVERLAP_DEFAULT = 0.0


def _gpu(device_name: str):
    for gpu in ALL_GPUS.values():
        if gpu.matches(device_name):
            return gpu
    raise LookupError(f"no hardware entry matches the recorded device {device_name!r}")


def calibrated_assumptions(book: Path | None = None) -> tuple[Assumptions, dict[str, str]]:
    """The default :class:`~infralens.parallel.plan.Assumptions` and, for each, where it came from."""
    roof, coll = latest("ch01-roofline", book), latest("ch06-collectives", book)
    if roof is None or coll is None or coll.results.get("skipped"):
        raise LookupError("the calibration records ch01-roofline and ch06-collectives are missing")
    mm = roof.results["matmul"]
    matmul = mm["flops_per_s"] / _gpu(roof.provenance["gpu"]).dense_bf16_flops.value
    ring = coll.results["runs"]["Ring"]
    largest = max((r for r in ring["rows"] if r["op"] == "all_reduce"), key=lambda r: r["bytes"])
    link = _gpu(coll.provenance["gpu"]).nvlink_bandwidth_bytes_per_s.value / 2
    nvlink = largest["busbw"] / link
    sources = {
        "matmul": f"ch01-roofline: {mm['m']}x{mm['n']}x{mm['k']} bf16 matmul on {roof.provenance['gpu']}",
        "nvlink": f"ch06-collectives: ring all-reduce of {largest['bytes'] / 2**30:g} GiB, "
                  f"{ring['world']} x {coll.provenance['gpu']}",
        "network": "estimate: the NVLink fraction (no inter-node record)",
        "memory_usable": "estimate",
        "dp_overlap": "assumption: exposed",
    }
    return Assumptions(matmul=matmul, nvlink=nvlink, network=nvlink,
                       memory_usable=MEMORY_USABLE_ESTIMATE, dp_overlap=DP_OVERLAP_DEFAULT), sources
