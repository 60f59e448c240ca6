"""Parallel training by the numbers: collectives, pipeline schedules, Megatron-LM's formulas and
a planner that puts them together for a model on a cluster.

* :mod:`~infralens.parallel.collectives`: bytes each rank sends, bus bandwidth, and five
  all-reduce algorithms in the α-β model.
* :mod:`~infralens.parallel.pipeline`: the bubble formula and a schedule simulator (naive,
  GPipe, 1F1B, interleaved 1F1B, zero-bubble ZB-H1).
* :mod:`~infralens.parallel.flops`: parameters, FLOPs per iteration, training days and MFU.
* :mod:`~infralens.parallel.plan`: the planner and its command line,
  ``python -m infralens.parallel.plan``; :mod:`~infralens.parallel.cluster` reads the cluster
  YAML; :mod:`~infralens.parallel.calibration` sets its defaults from the book's records;
  :mod:`~infralens.parallel.published` holds the published configurations it is checked against.
* :mod:`~infralens.parallel.tensor`: Megatron-LM's tensor-parallel block; ``tp_check`` and ``pp_check``
  run tensor and pipeline parallelism on real ranks against one process, and ``collective_bench``
  measures NCCL's bus bandwidth (all under ``torchrun``).
"""

from infralens.parallel.collectives import collective_bytes
from infralens.parallel.flops import megatron_params, mfu, palm_flops_per_token, training_days, training_flops
from infralens.parallel.pipeline import pipeline_bubble

__all__ = ["collective_bytes", "megatron_params", "mfu", "palm_flops_per_token", "pipeline_bubble",
           "training_days", "training_flops"]
