"""A cluster description for the planner, read from a small YAML file.

.. code-block:: yaml

    gpu: h100                       # a key of infralens.hardware.GPUS
    nodes: 8
    gpus_per_node: 8
    intra_node_bandwidth: 450 GB/s  # per GPU, each way; default: half the GPU's NVLink total
    inter_node_bandwidth: 400 Gb/s  # per GPU, each way (one network adapter per GPU)
    efficiency:                     # optional: the planner's assumptions (see plan.Assumptions)
      matmul: 0.6

Bandwidths are bytes per second, as a number or a string with a unit (``B/s``, ``KB/s``,
``MB/s``, ``GB/s``, ``TB/s``, or bits: ``Gb/s``, ``Tb/s``). Every field is checked before the
planner runs; a mistake raises :class:`ClusterError` with one line that names it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infralens.hardware import GPU, GPUS
from infralens.tools.cli import read_yaml

__all__ = ["Cluster", "ClusterError", "cluster_from_dict", "load_cluster", "parse_bandwidth"]

_UNITS = {"b/s": 1, "kb/s": 10**3, "mb/s": 10**6, "gb/s": 10**9, "tb/s": 10**12}
_FIELDS = {"gpu", "nodes", "gpus_per_node", "intra_node_bandwidth", "inter_node_bandwidth",
           "efficiency", "name"}


class ClusterError(ValueError):
    """A cluster file that cannot describe a cluster; the message is one line."""


@dataclass(frozen=True)
class Cluster:
    """GPUs, how they are grouped, and the bandwidth each GPU has inside and outside its node."""

    name: str
    gpu: GPU
    nodes: int
    gpus_per_node: int
    intra_node_bandwidth: float  # B/s per GPU, each way
    inter_node_bandwidth: float  # B/s per GPU, each way
    efficiency: Mapping[str, float]

    @property
    def n_gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def parse_bandwidth(value: Any, field: str) -> float:
    """``value`` in bytes per second: a positive number, or a string such as ``"400 Gb/s"``."""
    if isinstance(value, bool):
        raise ClusterError(f"{field} must be a bandwidth such as '450 GB/s', got {value!r}")
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgGtT]?)([bB])/s\s*", value)
        if not match:
            raise ClusterError(f"{field} must be a bandwidth such as '450 GB/s' or '400 Gb/s', "
                               f"got {value!r}")
        try:
            number = float(match.group(1))
        except ValueError:
            raise ClusterError(f"{field}: {match.group(1)!r} is not a number") from None
        prefix, unit = match.group(2).lower(), match.group(3)
        number *= _UNITS[f"{prefix}b/s"] / (8 if unit == "b" else 1)
    else:
        raise ClusterError(f"{field} must be a bandwidth such as '450 GB/s', got {value!r}")
    if not (math.isfinite(number) and number > 0):
        raise ClusterError(f"{field} must be positive and finite, got {value!r}")
    return number


def _count(raw: Mapping[str, Any], field: str) -> int:
    if field not in raw:
        raise ClusterError(f"missing required field '{field}'")
    value = raw[field]
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ClusterError(f"'{field}' must be a positive integer, got {value!r}")
    return value


def cluster_from_dict(raw: Any, name: str = "cluster") -> Cluster:
    """A :class:`Cluster` from the parsed YAML mapping (see the module docstring)."""
    if not isinstance(raw, Mapping):
        raise ClusterError(f"a cluster file must be a YAML mapping, got {type(raw).__name__}")
    unknown = sorted(set(map(str, raw)) - _FIELDS)
    if unknown:
        raise ClusterError(f"unknown field '{unknown[0]}'; fields: {', '.join(sorted(_FIELDS))}")
    if "gpu" not in raw:
        raise ClusterError("missing required field 'gpu'")
    key = raw["gpu"]
    if not isinstance(key, str) or key.lower() not in GPUS:
        raise ClusterError(f"unknown gpu {key!r}; choose from: {', '.join(GPUS)}")
    gpu = GPUS[key.lower()]
    nodes, per_node = _count(raw, "nodes"), _count(raw, "gpus_per_node")
    intra = (parse_bandwidth(raw["intra_node_bandwidth"], "intra_node_bandwidth")
             if "intra_node_bandwidth" in raw else gpu.nvlink_bandwidth_bytes_per_s.value / 2)
    if "inter_node_bandwidth" not in raw:
        if nodes > 1:
            raise ClusterError("missing required field 'inter_node_bandwidth' (more than one node)")
        inter = intra
    else:
        inter = parse_bandwidth(raw["inter_node_bandwidth"], "inter_node_bandwidth")
    efficiency = raw.get("efficiency") or {}
    if not isinstance(efficiency, Mapping):
        raise ClusterError(f"'efficiency' must be a mapping, got {efficiency!r}")
    checked = {}
    for k, v in efficiency.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
            raise ClusterError(f"efficiency '{k}' must be a fraction in (0, 1], got {v!r}")
        checked[str(k)] = float(v)
    label = raw.get("name", name)
    return Cluster(str(label), gpu, nodes, per_node, intra, inter, checked)


def load_cluster(path: str | os.PathLike[str]) -> Cluster:
    """Read and check a cluster YAML file."""
    raw = read_yaml(path, ClusterError, "cluster file")
    return cluster_from_dict(raw, Path(path).stem)
