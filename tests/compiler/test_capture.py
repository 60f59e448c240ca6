"""Each stage's artefact against an independent reading of the same stage: Dynamo's graphs
against a backend that records what it is given, the logs against the handlers they must leave
alone, AOTAutograd's graphs run as code against eager autograd in float64, Inductor's module
parsed for its kernels."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from infralens.compiler import capture
from infralens.compiler import examples as ex
from tests.tensors import seeded_randn

ROOT = Path(__file__).resolve().parents[2]
rand = seeded_randn(3)


def recorded_graphs(fn, *args) -> list[torch.fx.GraphModule]:
    """The FX graphs Dynamo hands a backend for one call of ``fn(*args)``."""
    graphs = []

    def backend(gm, _inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend)(*args)
    torch._dynamo.reset()
    return graphs


# --- Dynamo -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn, args, n_graphs", [
    (ex.normalize_if_large, (torch.randn(8) * 4,), 2),
    (ex.normalize_if_large, (torch.full((8,), 0.5),), 2),  # the other branch: the break is the same
    (ex.bias_gelu_residual, (torch.randn(2, 4), torch.randn(4), torch.randn(2, 4)), 1),
    (ex.scale, (torch.randn(4), 3.0), 1),
])
def test_dynamo_graphs_are_the_graphs_a_backend_receives(fn, args, n_graphs):
    cap = capture.dynamo_graphs(fn, *args)
    graphs = recorded_graphs(fn, *args)
    assert len(cap.graphs) == len(graphs) == n_graphs
    assert len(cap.breaks) == n_graphs - 1
    assert cap.graphs == [gm.code.strip() for gm in graphs]
    # explain counts call_function nodes (x.abs() is a call_method and is not counted)
    assert cap.ops == sum(n.op == "call_function" for gm in graphs for n in gm.graph.nodes)


def test_the_break_comes_after_the_comparison():
    cap = capture.dynamo_graphs(ex.normalize_if_large, torch.randn(8) * 4)
    first, second = cap.graphs
    assert first.splitlines()[-1].strip().startswith("return (gt")
    assert "abs" in first and "max" in first and "tanh" not in first
    assert "tanh" in second and "abs" not in second


# --- logs ---------------------------------------------------------------------------------------

def handler_levels() -> dict[str, list[tuple[str, int]]]:
    """The handlers' kinds and levels on torch's two loggers, sorted (``set_logs`` replaces
    torch's own handler objects and appends them after the others, so identity and order move)."""
    return {name: sorted((type(h).__name__, h.level) for h in logging.getLogger(name).handlers)
            for name in ("torch", "torch._dynamo")}


def test_compile_logs_captures_the_graph_break_and_restores_the_handlers():
    from torch._logging._internal import log_state

    mine = logging.StreamHandler()  # one more handler on torch's logger, at a level of its own
    mine.setLevel(logging.INFO)
    logging.getLogger("torch").addHandler(mine)
    try:
        before = handler_levels()
        during = {}

        def run():
            during.update(handler_levels())
            torch.compile(ex.normalize_if_large, backend="eager")(torch.randn(8))

        log = capture.compile_logs(("graph_breaks",), run)
        assert handler_levels() == before
        # while fn runs, every handler is silenced but the one compile_logs reads from
        loud = [(name, level) for name, handlers in during.items() for _, level in handlers
                if level <= logging.CRITICAL]
        assert loud == [("torch._dynamo", logging.NOTSET)]
        assert sum(map(len, during.values())) > 2
        assert mine in logging.getLogger("torch").handlers and mine.level == logging.INFO
    finally:
        logging.getLogger("torch").removeHandler(mine)
    assert "Data-dependent branching" in log
    assert "src/infralens/compiler/examples.py" in log and str(ROOT) not in log
    assert not log_state.is_artifact_enabled("graph_breaks")  # the artifact is off again


def test_compile_logs_restores_the_handlers_when_fn_raises():
    before = handler_levels()

    def fail():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        capture.compile_logs(("guards",), fail)
    assert handler_levels() == before


def test_guards_of_scale_specialize_on_k_and_the_size():
    compiled = torch.compile(ex.scale, backend="eager")
    log = capture.compile_logs(("guards",), lambda: compiled(torch.randn(8), 2.0))
    lines = capture.guard_lines(log)
    assert "EQUALS_MATCH: L['k'] == 2.0" in lines
    tensor = [g for g in lines if g.startswith("TENSOR_MATCH: check_tensor(L['x']")]
    assert len(tensor) == 1 and "size=[8]" in tensor[0] and "torch.float32" in tensor[0]
    assert capture.guard_lines(log, ("EQUALS_MATCH",)) == ["EQUALS_MATCH: L['k'] == 2.0"]
    torch._dynamo.reset()


def test_guard_lines_parses_the_tree_format():
    log = "\n".join([
        "GUARDS:",
        "TREE_GUARD_MANAGER:",
        "+- RootGuardManager",
        "| +- LAMBDA_GUARD: hooks ids == None  # _dynamo/output_graph.py:1 in init_ambient_guards",
        "| +- GLOBAL_STATE: ___check_global_state()",
        "| +- GuardManager: source=L['k'], accessed_by=FrameLocalsGuardAccessor(key='k')",
        "| | +- EQUALS_MATCH: L['k'] == 3.5                     # return x * k  # a.py:3 in f",
        "| | | +- ID_MATCH: ___check_obj_id(G['torch'], 1)  # return x * k  # a.py:3 in f",
        "+- EQUALS_MATCH: L['n'] == 4",
        "EQUALS_MATCH: not a tree line",
    ])
    assert capture.guard_lines(log) == ["LAMBDA_GUARD: hooks ids == None",
                                        "EQUALS_MATCH: L['k'] == 3.5", "EQUALS_MATCH: L['n'] == 4"]
    assert capture.guard_lines(log, ("ID_MATCH", "GLOBAL_STATE")) == [
        "GLOBAL_STATE: ___check_global_state()", "ID_MATCH: ___check_obj_id(G['torch'], 1)"]
    assert capture.guard_lines("", ("EQUALS_MATCH",)) == []


# --- AOTAutograd ------------------------------------------------------------------------------

def run_graph(code: str, *inputs):
    """Execute one of AOTAutograd's graphs from its code (``def forward(self, ...)``)."""
    namespace = {"torch": torch}
    exec(code, namespace)
    return namespace["forward"](None, *inputs)


def test_aot_graphs_compute_what_eager_autograd_computes():
    x, bias, residual = rand(4, 8).requires_grad_(), rand(8).requires_grad_(), rand(4, 8)
    graphs = capture.aot_graphs(ex.bias_gelu_residual, x, bias, residual)
    assert set(graphs) == {"joint", "forward", "backward"}
    assert "primals" in graphs["joint"] and "tangents" in graphs["joint"]
    assert "gelu_backward" in graphs["joint"] and "gelu_backward" not in graphs["forward"]

    # eager float64 reference: output, and the gradient of its sum (what aot_graphs backpropagates)
    xe, be = x.detach().clone().requires_grad_(), bias.detach().clone().requires_grad_()
    ref = residual + F.gelu(xe + be, approximate="tanh")
    ref_dx, ref_db = torch.autograd.grad(ref.sum(), (xe, be))
    # aot_graphs ran the compiled function forward and backward: the leaves hold its gradients
    torch.testing.assert_close(x.grad, ref_dx, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(bias.grad, ref_db, rtol=1e-14, atol=1e-14)
    assert residual.grad is None

    # the forward and backward graphs, run as code, give the same output and gradients
    out, *saved = run_graph(graphs["forward"], x.detach(), bias.detach(), residual)
    torch.testing.assert_close(out, ref.detach(), rtol=1e-15, atol=1e-15)
    dx, db, dr = run_graph(graphs["backward"], *saved, torch.ones_like(out))
    torch.testing.assert_close(dx, ref_dx, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(db, ref_db, rtol=1e-14, atol=1e-14)
    assert dr is None


# --- Inductor ---------------------------------------------------------------------------------

def test_inductor_writes_one_cpu_kernel_for_bias_gelu_residual():
    # the one test that runs Inductor's C++ compile (seconds warm, ~15 s with a cold cache)
    src = capture.inductor_source(ex.bias_gelu_residual, torch.randn(16, 32), torch.randn(32),
                                  torch.randn(16, 32))
    kernels = capture.inductor_kernels(src)
    assert len(kernels) == 1 and src.count("async_compile.cpp_pybinding(") == 1
    (name, body), = kernels.items()
    assert name.startswith("cpp_fused") and f"{name} = async_compile.cpp_pybinding(" in src
    assert 'extern "C"' in body and "tanh" in body and not body.endswith("'''")
    assert str(ROOT) + "/" not in src
    torch._dynamo.reset()


TRITON_MODULE = '''
import torch
async_compile = AsyncCompile()

triton_poi_fused_add_0 = async_compile.triton('triton_poi_fused_add_0', """not matched: double quotes""")

triton_poi_fused_add_gelu_0 = async_compile.triton('triton_poi_fused_add_gelu_0', \'\'\'
import triton

@triton.jit
def triton_poi_fused_add_gelu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    tmp0 = tl.load(in_ptr0 + x0)
\'\'\', device_str='cuda')


triton_red_fused_mean_mul_1 = async_compile.triton('triton_red_fused_mean_mul_1', \'\'\'
@triton.jit
def triton_red_fused_mean_mul_1(in_ptr0, out_ptr0, xnumel, r0_numel):
    pass
\'\'\', device_str='cuda')

async_compile.wait(globals())
'''


def test_inductor_kernels_parses_triton_modules():
    kernels = capture.inductor_kernels(TRITON_MODULE)
    assert list(kernels) == ["triton_poi_fused_add_gelu_0", "triton_red_fused_mean_mul_1"]
    first = kernels["triton_poi_fused_add_gelu_0"]
    assert first.startswith("import triton") and first.endswith("tl.load(in_ptr0 + x0)")
    assert kernels["triton_red_fused_mean_mul_1"].splitlines() == [
        "@triton.jit", "def triton_red_fused_mean_mul_1(in_ptr0, out_ptr0, xnumel, r0_numel):", "    pass"]
    assert capture.inductor_kernels("no kernels here") == {}
