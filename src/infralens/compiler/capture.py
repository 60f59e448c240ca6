"""Each stage of ``torch.compile`` made visible, in-process and on any device.

* **Dynamo** rewrites a Python frame's bytecode: it runs the function symbolically, records the
  torch operations into an FX graph, and installs *guards* (checks on the inputs' types, shapes,
  dtypes, Python values and global state) under which the compiled graph may be reused. Where it
  cannot continue (data-dependent control flow, an unsupported call) it ends the graph, lets
  Python run the rest, and resumes in a new graph: a *graph break*. :func:`dynamo_graphs` runs
  ``torch._dynamo.explain``; :func:`compile_logs` collects the ``graph_breaks``, ``guards`` and
  ``recompiles`` artifacts that ``TORCH_LOGS`` would print.
* **AOTAutograd** traces the captured graph with fake tensors down to ATen operators,
  functionalizes it (no in-place ops, no aliasing), and differentiates it into a *joint* graph
  of forward and backward that a partitioner cuts in two. :func:`aot_graphs` keeps all three.
* **Inductor** lowers the ATen graph, decides which operations share a kernel (fusion), and
  writes C++ (CPU) or Triton (GPU) source. :func:`inductor_source` returns the module it wrote.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch._dynamo

from infralens.tools.glue import repo_relative

__all__ = ["DynamoCapture", "aot_graphs", "compile_logs", "dynamo_graphs", "guard_lines",
           "inductor_kernels", "inductor_source", "fusion_report"]

@dataclass(frozen=True)
class DynamoCapture:
    graphs: list[str]  # the FX graphs' Python code, in the order Dynamo compiled them
    breaks: list[str]  # one reason per graph break
    ops: int  # explain's op_count: call_function nodes across the graphs (method calls not counted)


def dynamo_graphs(fn: Callable, *args) -> DynamoCapture:
    """What Dynamo captures from one call of ``fn(*args)``: graphs and graph-break reasons."""
    torch._dynamo.reset()
    e = torch._dynamo.explain(fn)(*args)
    return DynamoCapture([gm.code.strip() for gm in e.graphs],
                         [str(b.reason).splitlines()[0] for b in e.break_reasons], e.op_count)


def compile_logs(artifacts: tuple[str, ...], fn: Callable[[], object]) -> str:
    """Run ``fn()`` with the ``TORCH_LOGS`` artifacts turned on; return what they logged.

    Equivalent to ``TORCH_LOGS="graph_breaks,guards" python ...``, but captured here so a page can
    read it: ``torch._logging.set_logs`` turns the artifacts on and a handler on the
    ``torch._dynamo`` logger collects the records. Afterwards logging is back at torch's defaults
    (``set_logs()`` with no arguments), not at whatever the caller had set.
    """
    buf = io.StringIO()
    mine = logging.StreamHandler(buf)
    mine.setFormatter(logging.Formatter("%(message)s"))
    torch._dynamo.reset()
    torch._logging.set_logs(**{a: True for a in artifacts})
    loggers = [logging.getLogger(n) for n in ("torch", "torch._dynamo")]
    theirs = [(h, h.level) for lg in loggers for h in lg.handlers]
    for h, _ in theirs:  # torch's own console handlers: keep the build log clean
        h.setLevel(logging.CRITICAL + 1)
    loggers[1].addHandler(mine)
    try:
        fn()
    finally:
        loggers[1].removeHandler(mine)
        for h, level in theirs:
            h.setLevel(level)
        torch._logging.set_logs()
    return repo_relative(buf.getvalue())


_GUARD = re.compile(r"^[| ]*\+- (\w+): (.*?)(\s+#.*)?$")


def guard_lines(log: str, kinds: tuple[str, ...] = ("TENSOR_MATCH", "EQUALS_MATCH", "LAMBDA_GUARD")
                ) -> list[str]:
    """The guards of the given kinds from a ``guards`` log, without their source comments."""
    out = []
    for line in log.splitlines():
        m = _GUARD.match(line)
        if m and m.group(1) in kinds:
            out.append(f"{m.group(1)}: {m.group(2).strip()}")
    return out


def aot_graphs(fn: Callable, *args) -> dict[str, str]:
    """AOTAutograd's joint graph and the forward and backward graphs it is partitioned into.

    Uses ``aot_function`` with compilers that only keep the code they are given (no Inductor),
    and the default min-cut partitioner, which decides what the forward saves for backward.
    """
    from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
    from torch._functorch.aot_autograd import aot_function

    out: dict[str, str] = {}

    def keep(name: str):
        def compiler(gm, _inputs):
            out[name] = gm.code.strip()
            return make_boxed_func(gm.forward)
        return compiler

    def partition(joint, joint_inputs, **kw):
        out["joint"] = joint.code.strip()
        return min_cut_rematerialization_partition(joint, joint_inputs, **kw)

    compiled = aot_function(fn, fw_compiler=keep("forward"), bw_compiler=keep("backward"),
                            partition_fn=partition)
    res = compiled(*args)
    res.sum().backward()
    return out


def inductor_source(fn: Callable, *args) -> str:
    """The Python module Inductor generated for ``fn(*args)`` (its kernels are inside)."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    _, sources = run_and_get_code(torch.compile(fn), *args)
    return repo_relative("\n".join(sources))


_CPP = re.compile(r"(\w+) = async_compile\.cpp_pybinding\(.*?r'''\n(.*?)'''\)", re.S)
_TRITON = re.compile(r"(\w+) = async_compile\.triton\('\w+', '''\n(.*?)''', device_str", re.S)


def inductor_kernels(source: str) -> dict[str, str]:
    """Kernel name -> kernel source (C++ or Triton) found in an Inductor module."""
    return {name: body.strip() for pat in (_CPP, _TRITON) for name, body in pat.findall(source)}


def fusion_report(fn: Callable, *args) -> dict:
    """What Inductor fused in ``fn(*args)`` on a GPU: the CUDA kernels eager mode and the compiled
    function launch (names, in order), the source of every kernel Inductor wrote, and both
    functions' times (:func:`~infralens.tools.bench.bench`)."""
    from functools import partial

    from torch._inductor.utils import run_and_get_code

    from infralens.profiling.trace import cuda_kernels
    from infralens.tools.bench import bench

    torch._dynamo.reset()
    compiled = torch.compile(fn)
    _, sources = run_and_get_code(compiled, *args)
    return {"eager": cuda_kernels(fn, *args), "compiled": cuda_kernels(compiled, *args),
            "kernels": inductor_kernels(repo_relative("\n".join(sources))),
            "times": {"eager": bench(partial(fn, *args)), "compiled": bench(partial(compiled, *args))}}
