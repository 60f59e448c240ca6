"""python -m infralens.kernels: ptxas's report of each kernel, and one-line errors for bad input."""

import subprocess
import sys

import pytest

from infralens.kernels import library
from infralens.kernels.__main__ import main
from infralens.tools import nvcc

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")


def test_cli_rejects_bad_input_in_one_line(capsys):
    assert main(["report", "scan"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice" in err
    assert main(["ncu-driver", "reduce", "--n", "0"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "expected a positive integer, got 0" in err


def test_bad_architecture_is_one_line_too(capsys):
    assert main(["report", "reduce", "--arch", "sm_75"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice" in err and "sm_75" in err


def test_no_nvcc_is_one_line(monkeypatch, capsys):
    monkeypatch.setenv("INFRALENS_NVCC", "none")
    assert main(["report", "transpose"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m infralens.kernels: error: nvcc was not found")
    assert len(err.strip().splitlines()) == 1


@needs_nvcc
@pytest.mark.parametrize("name", sorted(library.SOURCES))
def test_report_lists_every_kernel_of_the_source_in_order(name, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path))
    assert main(["report", name, "--arch", "sm_80"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"{library.SOURCES[name]}: release ") and "(nvcc, " in lines[0]
    assert lines[1].split() == ["kernel", "regs", "smem", "B", "barriers", "stack", "B", "spills", "B"]
    defined = library.kernel_order(name)
    assert [row.split()[0] for row in lines[2:]] == defined
    for row in lines[2:]:
        regs, smem, barriers, stack, spills = map(int, row.split()[1:])
        assert 0 < regs <= 255 and stack == spills == 0
    assert main(["report", name, "--arch", "sm_80"]) == 0  # the second time, from the cache
    assert "(cache)" in capsys.readouterr().out.splitlines()[0]


def test_module_runs_as_a_program():
    done = subprocess.run([sys.executable, "-m", "infralens.kernels", "report", "scan"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr and done.stdout == ""
