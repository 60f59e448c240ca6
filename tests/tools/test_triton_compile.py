"""Triton's real compiler on a machine without a GPU: a tiny kernel's registers, shared memory and PTX.

The compiling runs in a subprocess without TRITON_INTERPRET (this test process runs Triton's
interpreter, see tests/conftest.py), on kernels written to a file (``triton.jit`` reads source).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

pytest.importorskip("triton")

from infralens.tools.triton_compile import compile_offline, launched_resources  # noqa: E402

SCRIPT = textwrap.dedent('''
    import json, sys
    import triton
    import triton.language as tl
    from infralens.tools.triton_compile import compile_offline

    @triton.jit
    def add_one(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1.0, mask=mask)

    @triton.jit
    def row_sum(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(y_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + tl.program_id(0) * BLOCK + offs), 0))

    out = {}
    for arch in (90, 80):
        out[f"add_one_{arch}"] = compile_offline(
            add_one, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
            {"BLOCK": 1024}, num_warps=4, arch=arch)
    out["row_sum"] = compile_offline(row_sum, {"x_ptr": "*fp32", "y_ptr": "*fp32", "BLOCK": "constexpr"},
                                     {"BLOCK": 4096}, num_warps=8)
    json.dump(out, sys.stdout)
''')


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    script = tmp_path_factory.mktemp("triton") / "compile_demo.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-W", "ignore", str(script)], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_registers_are_counted_for_a_tiny_kernel(compiled):
    for name in ("add_one_90", "add_one_80", "row_sum"):
        assert 0 < compiled[name]["registers"] <= 255, name


def test_ptx_is_for_the_asked_architecture(compiled):
    assert ".target sm_90" in compiled["add_one_90"]["ptx"]
    assert ".target sm_80" in compiled["add_one_80"]["ptx"]
    assert ".entry add_one(" in compiled["add_one_90"]["ptx"]
    # the pointers are declared 16-byte aligned, so the loads are 16-byte vectors
    assert "ld.global.v4" in compiled["add_one_90"]["ptx"]


def test_shared_memory_only_where_warps_must_combine(compiled):
    # An elementwise kernel keeps everything in registers; a sum over 8 warps needs shared memory
    # to combine the warps' partial sums.
    assert compiled["add_one_90"]["shared_bytes"] == 0
    assert compiled["row_sum"]["shared_bytes"] > 0


def test_refuses_under_the_interpreter(monkeypatch):
    for value in ("1", "true"):
        monkeypatch.setenv("TRITON_INTERPRET", value)
        with pytest.raises(RuntimeError, match="compiling needs the real compiler: unset TRITON_INTERPRET"):
            compile_offline(object(), {}, {}, num_warps=4)


def test_launched_resources_reads_the_compiled_kernel():
    kernel = SimpleNamespace(n_regs=40, n_spills=0, metadata=SimpleNamespace(shared=4096))
    assert launched_resources(kernel) == {"registers": 40, "spills": 0, "shared_bytes": 4096}


def test_check_block_takes_powers_of_two_up_to_tritons_largest_block():
    import triton.language as tl

    from infralens.tools.triton_compile import MAX_BLOCK_NUMEL, check_block

    assert MAX_BLOCK_NUMEL == tl.TRITON_MAX_TENSOR_NUMEL
    for good in (1, 16, 1024, MAX_BLOCK_NUMEL):
        check_block("BLOCK", good)
    for bad in (0, -4, 3, 48, 2 * MAX_BLOCK_NUMEL, True):
        with pytest.raises(ValueError, match=f"BLOCK {bad}: must be a power of two"):
            check_block("BLOCK", bad)
    with pytest.raises(ValueError, match="from 16"):
        check_block("BLOCK_M", 8, least=16)


def test_check_options_takes_what_a_block_of_warps_can_be(monkeypatch):
    from infralens.hardware import fact
    from infralens.tools.triton_compile import check_options

    most = fact("max_warps_per_block")  # 1024 threads
    for warps in (1, 2, 4, most):
        check_options(warps, 3)
    for warps in (0, 3, 6, 2 * most):
        with pytest.raises(ValueError, match=f"num_warps {warps}: must be a power of two from 1 to {most}"):
            check_options(warps)
    with pytest.raises(ValueError, match="num_stages 0"):
        check_options(4, 0)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="num_warps 3"):  # compile_offline checks before compiling
        compile_offline(object(), {}, {}, num_warps=3)


def test_quiet_drops_tritons_warnings_only():
    import warnings

    from infralens.tools.triton_compile import quiet

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet():
            warnings.warn_explicit("a Triton notice", UserWarning, "knobs.py", 1, module="triton.knobs")
            warnings.warn_explicit("ours", UserWarning, "x.py", 1, module="infralens.x")
    assert [str(w.message) for w in seen] == ["ours"]


def test_compile_command_checks_every_value_first_and_prints_json_lines(capsys):
    from infralens.tools.cli import OneLineParser
    from infralens.tools.triton_compile import check_block, compile_command

    compiled = []

    def compile_all(args):  # stands in for the compiles: records what it was asked for
        compiled.extend(args.block)
        return [{"block": b} for b in args.block]

    def main(argv):
        parser = OneLineParser(prog="demo")
        parser.add_argument("--block", type=int, action="append", default=[])
        return compile_command(parser, argv, each="block", wanted="--block BLOCK_N",
                               check=lambda args, block: check_block("BLOCK_N", block),
                               compile_all=compile_all)

    assert main(["--block", "16", "--block", "64"]) == 0
    assert capsys.readouterr().out == '{"block": 16}\n{"block": 64}\n' and compiled == [16, 64]
    assert main([]) == 2
    assert capsys.readouterr().err == "demo: error: give --block BLOCK_N at least once\n"
    assert main(["--block", "16", "--block", "3"]) == 2  # the bad size is refused before any compile
    assert "BLOCK_N 3: must be a power of two" in capsys.readouterr().err and compiled == [16, 64]


def test_launch_specialization_by_value_alignment_and_width():
    import torch

    from infralens.tools.triton_compile import launch_specialization

    assert launch_specialization(1) == ("constexpr", 1)  # the value 1 is compiled in
    assert launch_specialization(48) == ("i32", "D") and launch_specialization(50) == ("i32", "")
    assert launch_specialization(2**31 + 16)[0] == "i64"  # too wide for int32
    x = torch.empty(64)
    assert launch_specialization(x) == ("*fp32", "D") and launch_specialization(x[1:])[1] == ""


def test_offline_json_runs_the_real_compiler_from_an_interpreting_process():
    from infralens.tools.triton_compile import offline_json

    rows = offline_json("infralens.kernels.vector_add", "--block", "256")
    assert [r["aligned_n"] for r in rows] == [True, False] and rows[0]["block"] == 256
