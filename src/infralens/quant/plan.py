"""A quantization comparison as data: which models, which methods, in which formats and at which
granularities (Lab 11's starter, ``plans/small.yaml``).

.. code-block:: yaml

    data: {train_bytes: 1000000, held_out_bytes: 131072, calibration_sequences: 16}
    group_size: 32
    smoothquant_alpha: 0.5
    models:
      narrow: {d_model: 64, n_layers: 2, n_heads: 4, seq_len: 64, batch: 32, steps: 300, lr: 0.003}
    methods:
      rtn: {int8: [channel], int4: [channel, group]}

Every method names the weight formats it is run at and, for each, the weight granularities. What
each method does and which formats and granularities it takes is :data:`METHODS`; a plan that asks
for anything else, or misses a field, or is not YAML, raises :class:`PlanError` with one line that
names the problem, before anything is trained.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from infralens.tools.cli import MAX_INT, read_yaml

__all__ = ["Plan", "PlanError", "Cell", "ModelSpec", "METHODS", "FORMAT_BITS", "load_plan",
           "plan_from_dict", "shipped_plan"]

#: Bits per stored weight of each format.
FORMAT_BITS = {"int8": 8, "int4": 4, "e4m3": 8}

# [quant:methods]
#: Method -> {weight format: granularities it can be run at}, and what it quantizes.
METHODS: dict[str, dict[str, tuple[str, ...]]] = {
    "rtn": {"int8": ("tensor", "channel", "group"), "int4": ("tensor", "channel", "group")},
    "gptq": {"int8": ("channel", "group"), "int4": ("channel", "group")},
    "awq": {"int8": ("channel", "group"), "int4": ("channel", "group")},
    "w8a8": {"int8": ("tensor", "channel")},
    "smoothquant": {"int8": ("tensor", "channel")},
    "fp8": {"e4m3": ("tensor", "channel")},
}
#: Methods that also quantize each linear layer's input (per tensor, from its current values).
QUANTIZES_ACTIVATIONS = {"w8a8": "int8", "smoothquant": "int8", "fp8": "e4m3"}
#: Methods that need calibration inputs; GPTQ reads them from the model quantized so far.
CALIBRATED = ("gptq", "awq", "smoothquant")
SEQUENTIAL = ("gptq",)
# [/quant:methods]

_TOP = {"data", "group_size", "smoothquant_alpha", "models", "methods"}
_DATA = ("train_bytes", "held_out_bytes", "calibration_sequences")
_MODEL_INTS = ("d_model", "n_layers", "n_heads", "seq_len", "batch", "steps")


class PlanError(ValueError):
    """A comparison plan that cannot be run; the message is one line."""


@dataclass(frozen=True)
class ModelSpec:
    """A GPT to train on the corpus: its shape and its training run."""

    name: str
    d_model: int
    n_layers: int
    n_heads: int
    seq_len: int
    batch: int
    steps: int
    lr: float


@dataclass(frozen=True)
class Cell:
    """One entry of the matrix: a method at a weight format and granularity."""

    method: str
    format: str
    granularity: str

    @property
    def bits(self) -> int:
        return FORMAT_BITS[self.format]

    @property
    def label(self) -> str:
        return f"{self.method} {self.format} {self.granularity}"


@dataclass(frozen=True)
class Plan:
    train_bytes: int
    held_out_bytes: int
    calibration_sequences: int
    group_size: int
    smoothquant_alpha: float
    models: tuple[ModelSpec, ...]
    methods: Mapping[str, Mapping[str, tuple[str, ...]]]

    def cells(self) -> Iterator[Cell]:
        """The matrix, in the plan's order: every method at every format and granularity it names."""
        for method, formats in self.methods.items():
            for fmt, grans in formats.items():
                for gran in grans:
                    yield Cell(method, fmt, gran)


def _mapping(raw: Any, where: str) -> Mapping:
    if not isinstance(raw, Mapping):
        raise PlanError(f"{where} must be a mapping, got {type(raw).__name__}")
    return raw


def _only(raw: Mapping, allowed, where: str) -> None:
    unknown = sorted(set(map(str, raw)) - set(allowed))
    if unknown:
        raise PlanError(f"unknown field '{unknown[0]}' in {where}; fields: {', '.join(sorted(allowed))}")


def _int(raw: Mapping, key: str, where: str) -> int:
    if key not in raw:
        raise PlanError(f"missing field '{key}' in {where}")
    value = raw[key]
    if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_INT:
        raise PlanError(f"'{key}' in {where} must be a positive integer, got {value!r}")
    return value


def _fraction(raw: Mapping, key: str, where: str, default: float | None = None) -> float:
    if key not in raw and default is not None:
        return default
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not (
            math.isfinite(value) and 0 < value <= 1):
        raise PlanError(f"'{key}' in {where} must be a number in (0, 1], got {value!r}")
    return float(value)


def _model(name: str, raw: Any) -> ModelSpec:
    where = f"model '{name}'"
    raw = _mapping(raw, where)
    _only(raw, (*_MODEL_INTS, "lr"), where)
    sizes = {key: _int(raw, key, where) for key in _MODEL_INTS}
    if sizes["d_model"] % sizes["n_heads"]:
        raise PlanError(f"{where}: d_model={sizes['d_model']} is not divisible by "
                        f"n_heads={sizes['n_heads']}")
    return ModelSpec(name, lr=_fraction(raw, "lr", where), **sizes)


def _methods(raw: Any) -> dict[str, dict[str, tuple[str, ...]]]:
    raw = _mapping(raw, "'methods'")
    if not raw:
        raise PlanError("'methods' is empty: name at least one method")
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for method, formats in raw.items():
        if method not in METHODS:
            raise PlanError(f"unknown method {method!r}; choose from: {', '.join(METHODS)}")
        formats = _mapping(formats, f"method '{method}'")
        out[method] = {}
        for fmt, grans in formats.items():
            if fmt not in METHODS[method]:
                raise PlanError(f"method '{method}' takes formats {', '.join(METHODS[method])}; "
                                f"got {fmt!r}")
            if isinstance(grans, str):
                grans = [grans]
            if not isinstance(grans, list) or not grans:
                raise PlanError(f"'{method}' {fmt}: give a list of granularities, got {grans!r}")
            for gran in grans:
                if gran not in METHODS[method][fmt]:
                    raise PlanError(f"'{method}' {fmt} takes granularities "
                                    f"{', '.join(METHODS[method][fmt])}; got {gran!r}")
            if len(set(grans)) != len(grans):
                raise PlanError(f"'{method}' {fmt}: a granularity is listed twice in {grans}")
            out[method][fmt] = tuple(grans)
    return out


# [quant:plan-check]
def plan_from_dict(raw: Any) -> Plan:
    """A :class:`Plan` from the parsed YAML, every field checked (see the module docstring)."""
    raw = _mapping(raw, "a plan")
    _only(raw, _TOP, "the plan")
    for key in ("data", "models", "methods", "group_size"):
        if key not in raw:
            raise PlanError(f"missing field '{key}'")
    data = _mapping(raw["data"], "'data'")
    _only(data, _DATA, "'data'")
    sizes = {key: _int(data, key, "'data'") for key in _DATA}
    group = _int(raw, "group_size", "the plan")
    models = tuple(_model(str(name), spec) for name, spec in _mapping(raw["models"], "'models'").items())
    if not models:
        raise PlanError("'models' is empty: name at least one model")
    for m in models:
        for width, what in ((m.d_model, "d_model"), (4 * m.d_model, "4 * d_model")):
            if width % group:
                raise PlanError(f"group_size={group} must divide every layer's inputs; model "
                                f"'{m.name}' has {what} = {width}")
        need = m.seq_len + 1
        if sizes["held_out_bytes"] < need or sizes["train_bytes"] // m.seq_len < m.batch:
            raise PlanError(f"model '{m.name}': the data holds too few windows of {m.seq_len} "
                            f"tokens for a batch of {m.batch} or one held-out window")
        if sizes["calibration_sequences"] > sizes["train_bytes"] // m.seq_len:
            raise PlanError(f"calibration_sequences={sizes['calibration_sequences']} is more than "
                            f"the training windows of model '{m.name}'")
    return Plan(group_size=group, smoothquant_alpha=_fraction(raw, "smoothquant_alpha", "the plan",
                                                              0.5),
                models=models, methods=_methods(raw["methods"]), **sizes)
# [/quant:plan-check]


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Read and check a plan file."""
    raw = read_yaml(path, PlanError, "plan file")
    return plan_from_dict(raw)


def shipped_plan(name: str) -> Path:
    """The path of a plan that ships with the package (``"small"``, ``"full"``)."""
    path = Path(str(resources.files("infralens.quant").joinpath("plans", f"{name}.yaml")))
    if not path.is_file():
        raise PlanError(f"no shipped plan {name!r}")
    return path
