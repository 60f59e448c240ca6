"""The stages of one jitted function, and a reader for the HLO text XLA prints.

``jax.jit(f)`` goes through four representations before it runs: the **jaxpr** (JAX's own
typed program, one equation per primitive), **StableHLO** (the MLIR dialect JAX hands to a
compiler), **HLO** (XLA's input) and **optimized HLO** (after XLA's passes: fusion, layout,
partitioning into per-device programs with their collectives). :func:`stages` returns all four
as text; :func:`parse` reads HLO text into computations and instructions so that a cell can
count what XLA did instead of eyeballing it.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = [
    "COLLECTIVES", "HloModule", "Instruction", "array_bytes", "collectives", "fusions",
    "jaxpr_primitives", "parse", "stablehlo_ops", "stages",
]

#: HLO opcodes that move data between devices (their async ``-start`` forms count as the op).
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")

_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
                "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "f8e4m3fn": 1, "f8e5m2": 1}
_ARRAY = re.compile(r"([a-z0-9]+)\[([0-9,]*)\]")
_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\)\s*->.*)?\{\s*$")
_CALLS = re.compile(r"(?:calls|to_apply)=%?([\w.\-]+)")


@dataclass(frozen=True)
class Instruction:
    """One HLO instruction: ``name = shape opcode(operands), attributes``."""

    name: str
    opcode: str
    shape: str
    operands: str
    attributes: str
    root: bool = False

    @property
    def calls(self) -> list[str]:
        """The computations this instruction calls (a fusion's body, a reduction's combiner)."""
        return _CALLS.findall(self.attributes)

    def attribute(self, key: str) -> str | None:
        """The text of ``key=...`` up to the next top-level comma, or None."""
        start = self.attributes.find(f"{key}=")
        if start < 0:
            return None
        text, depth = self.attributes[start + len(key) + 1:], 0
        for i, ch in enumerate(text):
            depth += (ch in "({[") - (ch in ")}]")
            if ch == "," and depth == 0:
                return text[:i].strip()
        return text.strip()


@dataclass
class HloModule:
    """Computations by name, in the order printed; ``entry`` names the one XLA runs."""

    computations: dict[str, list[Instruction]] = field(default_factory=dict)
    entry: str = ""

    def instructions(self, computation: str | None = None) -> list[Instruction]:
        return self.computations[computation or self.entry]

    def opcodes(self, computation: str | None = None) -> Counter:
        """How many instructions of each opcode one computation (default: the entry) holds."""
        return Counter(i.opcode for i in self.instructions(computation))


def _split_shape(rest: str) -> tuple[str, str]:
    """Split ``shape opcode(...)...`` after a shape that may be a parenthesized tuple."""
    if rest.startswith("("):
        depth = 0
        for i, ch in enumerate(rest):
            depth += (ch == "(") - (ch == ")")
            if depth == 0:
                return rest[:i + 1], rest[i + 1:].lstrip()
    shape, _, tail = rest.partition(" ")
    return shape, tail


def _instruction(line: str) -> Instruction | None:
    text = line.strip()
    root = text.startswith("ROOT ")
    if root:
        text = text[5:]
    name, eq, rest = text.partition(" = ")
    if not eq:
        return None
    shape, tail = _split_shape(rest.strip())
    opcode, paren, after = tail.partition("(")
    if not paren or not re.fullmatch(r"[\w\-]+", opcode):
        return None
    depth, end = 1, len(after)
    for i, ch in enumerate(after):
        depth += (ch == "(") - (ch == ")")
        if depth == 0:
            end = i
            break
    return Instruction(name=name.lstrip("%"), opcode=opcode, shape=shape, operands=after[:end],
                       attributes=after[end + 1:].lstrip(", "), root=root)


def parse(text: str) -> HloModule:
    """Read HLO text (``as_text()`` of a lowered or compiled function) into an :class:`HloModule`."""
    module, current = HloModule(), None
    for line in text.splitlines():
        if current is None:
            head = _HEADER.match(line)
            if head and not line.lstrip().startswith("HloModule"):
                current = head.group(2)
                module.computations[current] = []
                if head.group(1):
                    module.entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        inst = _instruction(line)
        if inst is not None:
            module.computations[current].append(inst)
    if not module.entry:
        raise ValueError("no ENTRY computation in this HLO text")
    return module


def array_bytes(shape: str) -> int:
    """Bytes of an HLO shape such as ``bf16[8,64]{1,0}`` (a tuple: the sum of its arrays)."""
    total = 0
    for dtype, dims in _ARRAY.findall(shape):
        if dtype not in _DTYPE_BYTES:
            raise ValueError(f"unknown HLO element type {dtype!r} in {shape!r}")
        count = 1
        for d in filter(None, dims.split(",")):
            count *= int(d)
        total += count * _DTYPE_BYTES[dtype]
    return total


def collectives(text: str | HloModule) -> list[dict]:
    """Every collective in the module: op, shape, bytes of its result, and its device groups."""
    module = parse(text) if isinstance(text, str) else text
    found = []
    for comp in module.computations.values():
        for inst in comp:
            op = inst.opcode.removesuffix("-start")
            if op in COLLECTIVES:
                found.append({"op": op, "name": inst.name, "shape": inst.shape,
                              "bytes": array_bytes(inst.shape),
                              "replica_groups": inst.attribute("replica_groups")})
    return found


def fusions(text: str | HloModule) -> list[dict]:
    """The entry computation's fusions: name, kind (``kLoop``, ``kInput``, ``kOutput``,
    ``kCustom``) and the opcodes fused into each (parameters and constants left out)."""
    module = parse(text) if isinstance(text, str) else text
    out = []
    for inst in module.instructions():
        if inst.opcode != "fusion":
            continue
        inside: Counter = Counter()
        stack = list(inst.calls)
        while stack:
            body = stack.pop()
            for sub in module.computations.get(body, []):
                if sub.opcode in ("parameter", "constant"):
                    continue
                inside[sub.opcode] += 1
                stack.extend(c for c in sub.calls if sub.opcode == "fusion")
        out.append({"name": inst.name, "kind": inst.attribute("kind"), "ops": dict(inside),
                    "shape": inst.shape})
    return out


def jaxpr_primitives(closed_jaxpr) -> Counter:
    """Primitive names of a jaxpr's top-level equations, counted."""
    return Counter(eqn.primitive.name for eqn in closed_jaxpr.jaxpr.eqns)


def stablehlo_ops(text: str) -> Counter:
    """Operations of a StableHLO module (``stablehlo.*``, plus ``sdy.*`` sharding ops), counted.

    An operation starts a line or follows ``=``; dialect names inside attributes do not count."""
    return Counter(re.findall(r'(?:^|=)\s*"?((?:stablehlo|sdy)\.[a-z_]+)', text, re.M))


def stages(fn, *args, **kwargs) -> dict[str, object]:
    """The four representations of ``jax.jit(fn)(*args, **kwargs)``, as text, plus the jaxpr."""
    import jax

    jitted = fn if hasattr(fn, "trace") else jax.jit(fn)
    traced = jitted.trace(*args, **kwargs)
    lowered = traced.lower()
    compiled = lowered.compile()
    return {"jaxpr": traced.jaxpr, "stablehlo": lowered.as_text(),
            "hlo": lowered.as_text(dialect="hlo"), "optimized_hlo": compiled.as_text(),
            "compiled": compiled}
