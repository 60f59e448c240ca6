"""The command-line conventions: one error line, exit status 2, and a run shown as a terminal would."""

import argparse
import gzip
import io
import json
import os
import re
import shlex
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from infralens.tools import cli


@pytest.mark.parametrize("text, value", [("1", 1), ("42", 42), (" 7 ", 7), ("+3", 3)])
def test_positive_int_accepts_what_int_accepts(text, value):
    assert cli.positive_int(text) == int(text) == value


@pytest.mark.parametrize("text, message", [("0", "got 0"), ("-2", "got -2"), ("2k", "got '2k'"),
                                           ("1.5", "got '1.5'"), ("", "got ''")])
def test_positive_int_refuses(text, message):
    with pytest.raises(argparse.ArgumentTypeError, match=f"expected a positive integer, {message}$"):
        cli.positive_int(text)


def test_non_negative_int():
    assert cli.non_negative_int("0") == 0 and cli.non_negative_int("5") == 5
    with pytest.raises(argparse.ArgumentTypeError, match="expected a non-negative integer, got -1"):
        cli.non_negative_int("-1")


def test_parser_errors_become_usage_errors_without_the_usage_block(capsys):
    parser = cli.OneLineParser(prog="demo")
    parser.add_argument("--n", type=cli.positive_int, required=True)
    assert parser.parse_args(["--n", "3"]).n == 3
    for argv, words in ((["--n", "0"], "expected a positive integer, got 0"),
                        ([], "the following arguments are required: --n"),
                        (["--n", "1", "--m"], "unrecognized arguments: --m")):
        with pytest.raises(cli.UsageError, match=words):
            parser.parse_args(argv)
    assert capsys.readouterr() == ("", "")  # argparse printed nothing


def test_one_line_error_folds_the_reason(capsys):
    assert cli.one_line_error("demo", ValueError("bad\n  input:\tthree   words")) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == "demo: error: bad input: three words\n"


def test_run_module_of_a_missing_module_is_a_status_not_an_exception(capsys):
    done = cli.run_module("this_module_does_not_exist_anywhere", timeout=60)
    assert done.args[:3] == [sys.executable, "-m", "this_module_does_not_exist_anywhere"]
    out = capsys.readouterr().out
    assert done.returncode == 1 and "No module named this_module_does_not_exist_anywhere" in out
    assert out.splitlines()[0] == "$ python -m this_module_does_not_exist_anywhere"
    assert out.splitlines()[-1] == "[exit status 1]"


def test_run_module_shows_stdout_then_stderr_and_returns_a_failure(tmp_path, capsys):
    (tmp_path / "demo_mod.py").write_text(
        "import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": ""}
    done = cli.run_module("demo_mod", ["--flag", "a b"], env=env, timeout=60)
    assert done.returncode == 3
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["$ " + shlex.join(["python", "-m", "demo_mod", "--flag", "a b"]),
                     "to stdout", "to stderr", "[exit status 3]"]


def test_run_module_inherits_this_environment_and_shows_a_success(tmp_path, capsys, monkeypatch):
    (tmp_path / "env_mod.py").write_text(
        "import os, sys\nprint(os.environ['INFRALENS_TEST_MARK'], sys.executable)\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("INFRALENS_TEST_MARK", "inherited")
    done = cli.run_module("env_mod", timeout=60)  # no env: the child gets this process's
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout == f"inherited {sys.executable}\n"  # the same interpreter
    assert capsys.readouterr().out == f"$ python -m env_mod\ninherited {sys.executable}\n[exit status 0]\n"


def test_run_module_replaces_the_environment_when_given_one(tmp_path, capsys, monkeypatch):
    (tmp_path / "env_mod2.py").write_text("import os\nprint(os.environ.get('INFRALENS_TEST_MARK'))\n")
    monkeypatch.setenv("INFRALENS_TEST_MARK", "not passed on")
    done = cli.run_module("env_mod2", env={"PYTHONPATH": str(tmp_path)}, timeout=60)
    assert (done.returncode, done.stdout) == (0, "None\n")
    capsys.readouterr()


def test_run_module_gives_up_after_its_timeout(tmp_path, capsys):
    (tmp_path / "slow_mod.py").write_text("import time\ntime.sleep(30)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        cli.run_module("slow_mod", env={"PYTHONPATH": str(tmp_path)}, timeout=1)
    assert capsys.readouterr().out == ""  # nothing printed for a run that did not finish


def test_a_cli_of_this_package_gives_one_line_and_status_2_through_run_module(capsys):
    # The project's rule for bad input, end to end: one line on stderr, exit status 2.
    done = cli.run_module("infralens.memory", ["--model", "no-such-model"], timeout=120)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("infralens.memory: error: ")  # <prog>: error: <reason>
    assert capsys.readouterr().out.splitlines()[-1] == "[exit status 2]"


# --- run_main: the one main of every command line, and --out files -------------------------------

def _demo_parser():
    parser = cli.OneLineParser(prog="demo")
    parser.add_argument("--n", type=cli.positive_int, required=True)
    return parser


def test_run_main_runs_what_prepare_returned(capsys):
    ran = []
    assert cli.run_main("demo", ["--n", "3"], lambda a: _demo_parser().parse_args(a).n, ran.append) == 0
    assert ran == [3]
    assert cli.run_main("demo", ["--n", "3"], lambda a: None, lambda _: 5) == 5  # run's own status
    assert cli.run_main("demo", [], lambda a: None) == 0  # nothing to run
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv, words", [([], "--n"), (["--n", "0"], "positive"), (["--n", "7"], "odd")])
def test_run_main_turns_bad_input_into_one_line_and_status_2(argv, words, capsys):
    def prepare(a):
        n = _demo_parser().parse_args(a).n
        if n % 2:
            raise ValueError(f"an odd n:\n{n}")  # folded onto one line
        return n

    ran = []
    assert cli.run_main("demo", argv, prepare, ran.append) == 2
    err = capsys.readouterr().err
    assert not ran and err.startswith("demo: error: ") and words in err and err.count("\n") == 1


def test_run_main_passes_help_through_and_leaves_run_errors_alone(capsys):
    assert cli.run_main("demo", ["--help"], lambda a: _demo_parser().parse_args(a)) == 0
    assert "--n" in capsys.readouterr().out

    def fails(_):
        raise ValueError("a bug, not bad input")

    with pytest.raises(ValueError, match="a bug"):  # the program's errors keep their traceback
        cli.run_main("demo", ["--n", "2"], lambda a: None, fails)
    with pytest.raises(KeyError):  # an error that is not among `errors`
        cli.run_main("demo", [], lambda a: {}["missing"])
    assert cli.run_main("demo", [], lambda a: {}["missing"], errors=(KeyError,)) == 2


def test_write_json_replaces_the_file_whole(tmp_path):
    out = tmp_path / "out.json"
    out.write_text("old")
    cli.write_json(str(out), {"a": [1, 2]})
    assert json.loads(out.read_text()) == {"a": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no .partial left behind


def test_whole_file_leaves_the_old_file_when_the_write_fails(tmp_path):
    out = tmp_path / "ckpt.pt"
    out.write_text("old")
    with pytest.raises(RuntimeError), cli.whole_file(out) as tmp:
        with open(tmp, "w") as f:
            f.write("half")
        raise RuntimeError("the run died while saving")
    assert out.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["ckpt.pt"]
    with cli.whole_file(out) as tmp:
        assert tmp != str(out)  # never in place
        with open(tmp, "w") as f:
            f.write("new")
        assert out.read_text() == "old"  # a reader still sees the old file until the rename
    assert out.read_text() == "new"


@pytest.mark.parametrize("text, words", [
    ("1" + "0" * 400, "of at most 2**63 - 1, got a 401-digit number"),
    (str(2**63), "of at most 2**63 - 1, got 9223372036854775808"),
    ("9" * 5000, "got '" + "9" * 20 + "'... (5,000 characters)"),  # more digits than int() reads
])
def test_sizes_have_a_ceiling_and_a_short_error(text, words):
    assert cli.positive_int(str(2**63 - 1)) == cli.MAX_INT
    with pytest.raises(argparse.ArgumentTypeError) as info:
        cli.positive_int(text)
    assert words in str(info.value) and len(str(info.value)) < 120


@pytest.mark.parametrize("text", ["inf", "-inf", "nan", "0", "-1e-3", "fast", ""])
def test_positive_float_refuses_what_no_rate_or_size_is(text):
    assert cli.positive_float("1e-3") == 1e-3
    with pytest.raises(argparse.ArgumentTypeError, match="positive number"):
        cli.positive_float(text)


def test_output_path_is_checked_when_the_flag_is_parsed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.output_path("out.json") == "out.json"  # in the working directory
    assert cli.output_path(str(tmp_path / "out.json")) == str(tmp_path / "out.json")
    for text, words in ((str(tmp_path), "is a folder"), ("nodir/x.json", "does not exist"),
                        ("", "expected a file path")):
        with pytest.raises(argparse.ArgumentTypeError, match=words):
            cli.output_path(text)
    assert [p.name for p in tmp_path.iterdir()] == []  # checking writes nothing


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly():
    # `... | head`: the command's output meets a closed pipe. No BrokenPipeError, no traceback.
    path = os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.Popen([sys.executable, "-m", "infralens.training.zero_memory_accounting",
                             "--params", "7.5B", "--dp", "64"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    proc.stdout.close()  # the reader is gone before the first line
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == cli.CLOSED_PIPE_STATUS and err == ""


def test_run_main_stops_quietly_on_a_closed_pipe(capsys):
    def run(_):
        raise BrokenPipeError(32, "Broken pipe")

    assert cli.run_main("demo", [], lambda a: None, run) == cli.CLOSED_PIPE_STATUS
    assert capsys.readouterr() == ("", "")


# --- every command line of the package, bad input: one line, status 2, nothing written -----------
#
# Each row runs the real entry point in a subprocess, as a reader would type it: `VAR=value`
# words in front set the environment (a torchrun rank's variables, for a check that needs the
# world size), `{in}` is a folder of prepared inputs (archives, configs, a book) and `{out}` an
# empty folder, the working directory. Every row must fail before heavy work starts (importing
# torch is allowed), so the table stays fast.

SRC = Path(cli.__file__).resolve().parents[2]
HUGE = "1" + "0" * 400  # a 401-digit "size"
PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef", "dirty": False}
RANK0_OF_2 = "RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=1"


def _no_gpu() -> bool:
    import torch

    return not torch.cuda.is_available()


NO_GPU = pytest.mark.skipif(not _no_gpu(), reason="this row is about a machine without a GPU")


def _record_json(record: str = "demo-cell", **changes) -> bytes:
    data = {"record": record, "page": "labs/demo", "cell_sha256": "0" * 64, "provenance": PROV,
            "results": {"v": 1}, "stdout": "", "figures": [], "seconds": 1.0, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None}).encode()


def _archive(path: Path, members: dict[str, bytes | None], *, link: str | None = None) -> None:
    """A .tar.gz of ``members`` (a name ending in / is a folder; None content: a symbolic link)."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name.rstrip("/"))
            if name.endswith("/"):
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif data is None:
                info.type, info.linkname = tarfile.SYMTYPE, link or "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Bad (and a few good) inputs that every row may read and none may change."""
    d = tmp_path_factory.mktemp("inputs")
    (d / "adir").mkdir()
    (d / "malformed.json").write_text("{not json")
    (d / "cluster.yaml").write_text("gpu: h100\nnodes: 1\ngpus_per_node: 8\n")
    (d / "badgpu.yaml").write_text("gpu: v100\nnodes: 1\ngpus_per_node: 8\n")
    (d / "badplan.yaml").write_text(
        "data: {train_bytes: 1000, held_out_bytes: 100, calibration_sequences: 1}\ngroup_size: 8\n"
        "models: {m: {d_model: 16, n_layers: 1, n_heads: 2, seq_len: 8, batch: 2, steps: 1, lr: 0.01}}\n"
        "methods: {gptq: {e4m3: [tensor]}}\n")
    (d / "heads.json").write_text(json.dumps({
        "model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
        "num_hidden_layers": 32, "num_attention_heads": 30}))
    page = ("---\njupytext:\n  text_representation:\n    format_name: myst\n---\n\n# Demo\n\n"
            "```{code-cell} ipython3\n:tags: [gpu]\n:record: demo-cell\nx = 1\n```\n")
    for book in ("book", "broken-book"):
        (d / book / "labs").mkdir(parents=True)
        (d / book / "labs" / "demo.md").write_text(page)
    broken = d / "broken-book" / "_records" / "demo-cell" / "run"  # a malformed record on disk
    broken.mkdir(parents=True)
    (broken / "record.json").write_text('{"record": "demo-cell", "page": ')
    run = "demo-cell/20261121T070000Z-nvidia-h100"
    _archive(d / "good.tar.gz", {"demo-cell/": b"", f"{run}/": b"", f"{run}/record.json": _record_json()})
    _archive(d / "malformed-record.tar.gz", {f"{run}/record.json": b'{"record": "demo-cell",'})
    _archive(d / "missing-field.tar.gz", {f"{run}/record.json": _record_json(results=None)})
    _archive(d / "other-record.tar.gz", {f"{run}/record.json": _record_json("other-cell")})
    _archive(d / "no-record-json.tar.gz", {f"{run}/fig-1.svg": b"<svg/>"})
    _archive(d / "missing-figure.tar.gz", {f"{run}/record.json": _record_json(figures=["fig-1"])})
    _archive(d / "escape.tar.gz", {"../escape.txt": b"{}"})
    _archive(d / "too-deep.tar.gz", {f"{run}/deeper/record.json": _record_json()})
    _archive(d / "link.tar.gz", {f"{run}/record.json": None})
    _archive(d / "empty.tar.gz", {"demo-cell/": b""})
    whole = (d / "good.tar.gz").read_bytes()
    (d / "truncated.tar.gz").write_bytes(whole[: len(whole) // 2])
    (d / "bad-crc.tar.gz").write_bytes(whole[:-8] + bytes(8))  # the gzip trailer zeroed
    (d / "not-gzip.tar.gz").write_text("hello")
    with tarfile.open(d / "plain.tar", "w") as tar:  # a tar that is not gzipped
        tar.addfile(tarfile.TarInfo("demo-cell/"))
    assert gzip.decompress(whole)  # the good archive is whole
    return d


BAD_INPUT = [
    # python -m infralens.tools.cells: arguments, archives (checked whole before extraction), records
    ("infralens.tools.cells --bogus list", "unrecognized arguments: --bogus"),
    ("infralens.tools.cells", "required: command"),
    ("infralens.tools.cells frobnicate", "invalid choice: 'frobnicate'"),
    ("infralens.tools.cells unpack", "required: archive"),
    ("infralens.tools.cells run --record", "--record: expected one argument"),
    ("infralens.tools.cells --book {in}/nowhere list", "book folder not found"),
    ("infralens.tools.cells --book {in}/book unpack {in}/missing.tar.gz", "archive not found"),
    ("infralens.tools.cells --book {in}/book unpack {in}/adir", "is a folder"),
    ("infralens.tools.cells --book {in}/book unpack {in}/not-gzip.tar.gz", "not a readable .tar.gz"),
    ("infralens.tools.cells --book {in}/book unpack {in}/plain.tar", "not a readable .tar.gz"),
    ("infralens.tools.cells --book {in}/book unpack {in}/truncated.tar.gz", "not a readable .tar.gz"),
    ("infralens.tools.cells --book {in}/book unpack {in}/bad-crc.tar.gz", "not a readable .tar.gz"),
    ("infralens.tools.cells --book {in}/book unpack {in}/malformed-record.tar.gz", "not a JSON record"),
    ("infralens.tools.cells --book {in}/book unpack {in}/missing-field.tar.gz", "no 'results'"),
    ("infralens.tools.cells --book {in}/book unpack {in}/other-record.tar.gz", "record of 'other-cell'"),
    ("infralens.tools.cells --book {in}/book unpack {in}/no-record-json.tar.gz", "has no record.json"),
    ("infralens.tools.cells --book {in}/book unpack {in}/missing-figure.tar.gz", "figure 'fig-1'"),
    ("infralens.tools.cells --book {in}/book unpack {in}/escape.tar.gz", "member '../escape.txt'"),
    ("infralens.tools.cells --book {in}/book unpack {in}/too-deep.tar.gz", "expected <record>/<run>/<file>"),
    ("infralens.tools.cells --book {in}/book unpack {in}/link.tar.gz", "not a plain folder"),
    ("infralens.tools.cells --book {in}/book unpack {in}/empty.tar.gz", "holds no records"),
    ("infralens.tools.cells --book {in}/broken-book list", "demo-cell/run/record.json: not a JSON record"),
    ("infralens.tools.cells --book {in}/broken-book unpack {in}/good.tar.gz", "demo-cell/run/record.json"),
    ("infralens.tools.cells --book {in}/book run --archive {out}/nodir/r.tar.gz", "does not exist"),
    ("infralens.tools.cells --book {in}/book run --archive {in}/adir", "is a folder"),
    pytest.param("infralens.tools.cells --book {in}/book check-cuda", "no CUDA GPU", marks=NO_GPU),
    pytest.param("infralens.tools.cells --book {in}/book run", "no CUDA GPU", marks=NO_GPU),
    # python -m infralens.kernels
    ("infralens.kernels", "required: command"),
    ("infralens.kernels report nosuch", "invalid choice: 'nosuch'"),
    ("infralens.kernels report reduce --arch sm_1", "invalid choice: 'sm_1'"),
    pytest.param("infralens.kernels ncu-driver reduce", "no CUDA GPU", marks=NO_GPU),
    ("infralens.kernels ncu-driver reduce --n 0", "expected a positive integer, got 0"),
    ("infralens.kernels ncu-driver reduce --n -5", "expected a positive integer, got -5"),
    (f"infralens.kernels ncu-driver reduce --n {HUGE}", "at most 2**63 - 1, got a 401-digit number"),
    ("infralens.kernels ncu-driver transpose --rows 2k", "got '2k'"),
    ("infralens.kernels ncu-driver reduce --n", "--n: expected one argument"),
    # python -m infralens.attention.dram and infralens.kernels.persistent_grid
    ("infralens.attention.dram", "required: --impl"),
    ("infralens.attention.dram --impl nosuch", "invalid choice: 'nosuch'"),
    (f"infralens.attention.dram --impl triton --seq {HUGE}", "at most 2**63 - 1"),
    ("infralens.attention.dram --impl triton --batch 0", "expected a positive integer, got 0"),
    pytest.param("infralens.attention.dram --impl triton", "no CUDA GPU", marks=NO_GPU),
    ("infralens.gpuarch.cache_sweep", "required: --working-set-mib"),
    ("infralens.gpuarch.cache_sweep --working-set-mib 0", "expected a positive integer, got 0"),
    ("infralens.gpuarch.cache_sweep --working-set-mib 64 --total-mib 16",
     "--total-mib 16 is smaller than --working-set-mib 64"),
    pytest.param("infralens.gpuarch.cache_sweep --working-set-mib 16", "no CUDA GPU", marks=NO_GPU),
    ("infralens.kernels.persistent_grid", "give --block"),
    ("infralens.kernels.persistent_grid --block 48", "BLOCK_N 48: must be a power of two"),
    ("infralens.kernels.persistent_grid --block 1024 --stages 0", "expected a positive integer, got 0"),
    # python -m infralens.attention.triton_flash: configs the compiler or the GPU refuses
    ("infralens.attention.triton_flash", "give --config"),
    ("infralens.attention.triton_flash --config 64,64,4", "four integers"),
    ("infralens.attention.triton_flash --config a,b,c,d", "four integers"),
    ("infralens.attention.triton_flash --config 48,64,4,2", "BLOCK_M 48: must be a power of two"),
    ("infralens.attention.triton_flash --config 64,48,4,2", "BLOCK_N 48: must be a power of two"),
    ("infralens.attention.triton_flash --config 0,64,4,2", "BLOCK_M 0"),
    ("infralens.attention.triton_flash --config=-64,64,4,2", "BLOCK_M -64"),
    ("infralens.attention.triton_flash --config 8,8,4,2", "BLOCK_M 8: must be a power of two from 16"),
    ("infralens.attention.triton_flash --config 64,64,3,2", "num_warps 3"),
    ("infralens.attention.triton_flash --config 64,64,0,2", "num_warps 0"),
    ("infralens.attention.triton_flash --config 64,64,64,2", "num_warps 64"),
    ("infralens.attention.triton_flash --config 64,64,4,0", "num_stages 0"),
    ("infralens.attention.triton_flash --config 64,64,4,-1", "num_stages -1"),
    ("infralens.attention.triton_flash --config 1024,1024,4,2", "more than the 65,536 registers"),
    ("infralens.attention.triton_flash --config 2048,16,4,1", "BLOCK_M x D accumulator"),
    ("infralens.attention.triton_flash --config 64,128,4,2", "multiple of BLOCK_N"),
    ("infralens.attention.triton_flash --head-dim 7 --config 64,64,4,2", "invalid choice: 7"),
    ("infralens.attention.triton_flash --config 64,64,4,2 --config 48,64,4,2", "BLOCK_M 48"),
    # python -m infralens.kernels.triton_softmax
    ("infralens.kernels.triton_softmax", "give --block"),
    ("infralens.kernels.triton_softmax --block 48", "BLOCK_N 48: must be a power of two"),
    ("infralens.kernels.triton_softmax --block 0", "expected a positive integer, got 0"),
    ("infralens.kernels.triton_softmax --block=-4", "expected a positive integer, got -4"),
    ("infralens.kernels.triton_softmax --block 2097152", "BLOCK_N 2097152"),
    (f"infralens.kernels.triton_softmax --block {HUGE}", "at most 2**63 - 1"),
    ("infralens.kernels.triton_softmax --block x", "got 'x'"),
    ("infralens.kernels.triton_softmax --block 1024 --dtype fp8", "invalid choice: 'fp8'"),
    ("infralens.kernels.triton_softmax --block 1024 --block 3", "BLOCK_N 3"),
    # python -m infralens.kernels.triton_matmul
    ("infralens.kernels.triton_matmul", "give --arch"),
    ("infralens.kernels.triton_matmul --arch 70", "invalid choice: 70"),
    ("infralens.kernels.triton_matmul --arch 80 --kernel tma", "sm_80 has no TMA unit"),
    ("infralens.kernels.triton_matmul --arch 90 --arch 80 --kernel tma", "sm_80 has no TMA unit"),
    ("infralens.kernels.triton_matmul --arch 80 --dtype fp8e4nv", "sm_80 has no TMA unit and no FP8"),
    ("infralens.kernels.triton_matmul --arch 90 --kernel cuda", "invalid choice: 'cuda'"),
    # python -m infralens.kernels.vector_add
    ("infralens.kernels.vector_add", "give --block"),
    ("infralens.kernels.vector_add --block 1000", "BLOCK 1000: must be a power of two"),
    ("infralens.kernels.vector_add --block 0", "expected a positive integer, got 0"),
    ("infralens.kernels.vector_add --block 1024 --dtype fp64", "invalid choice: 'fp64'"),
    ("infralens.kernels.vector_add --block 1024 --arch 75", "invalid choice: 75"),
    # python -m infralens.memory
    ("infralens.memory --model gpt2 --seq-len 4096", "past gpt2's 1,024 positions"),
    ("infralens.memory", "one of the arguments --hf-config --model --family is required"),
    ("infralens.memory --model nosuch", "invalid choice: 'nosuch'"),
    ("infralens.memory --model gpt2 --batch 0", "expected a positive integer, got 0"),
    ("infralens.memory --model gpt2 --batch -3", "expected a positive integer, got -3"),
    (f"infralens.memory --model gpt2 --seq-len {HUGE}", "at most 2**63 - 1"),
    (f"infralens.memory --family llama --hidden {HUGE} --layers 2 --heads 2 --vocab 8 --ffn 8",
     "at most 2**63 - 1"),
    ("infralens.memory --hf-config {in}/malformed.json", "is not valid JSON"),
    ("infralens.memory --hf-config {in}/heads.json", "does not divide 'hidden_size'"),
    ("infralens.memory --hf-config {in}/adir", "cannot read config file"),
    ("infralens.memory --hf-config {in}/missing.json", "cannot read config file"),
    ("infralens.memory --family llama --hidden 64", "--family llama needs --layers"),
    ("infralens.memory --model gpt2 --frobnicate", "unrecognized arguments: --frobnicate"),
    ("infralens.memory --model gpt2 --tp", "--tp: expected one argument"),
    # python -m infralens.training.zero_memory_accounting
    ("infralens.training.zero_memory_accounting", "required: --params, --dp"),
    ("infralens.training.zero_memory_accounting --params 1e400 --dp 2", "at most 2**63 - 1"),
    (f"infralens.training.zero_memory_accounting --params {HUGE} --dp 2", "at most 2**63 - 1"),
    ("infralens.training.zero_memory_accounting --params=-7B --dp 2", "must be positive"),
    ("infralens.training.zero_memory_accounting --params 0.5 --dp 2", "positive whole number"),
    ("infralens.training.zero_memory_accounting --params 7B --dp 0", "expected a positive integer, got 0"),
    (f"infralens.training.zero_memory_accounting --params 7B --dp 2 --k {HUGE}", "at most 2**63 - 1"),
    ("infralens.training.zero_memory_accounting --params 7B --dp 64 --schemes zero9", "zero9"),
    ("infralens.training.zero_memory_accounting --params 7B --dp 64 --shard-group 7", "does not divide"),
    # python -m infralens.training.train_single_gpu: checked before the model is built
    ("infralens.training.train_single_gpu --batch 1024", "has 1,023 such windows"),
    ("infralens.training.train_single_gpu --seq-len 64 --batch 1000000", "has 1,023 such windows"),
    ("infralens.training.train_single_gpu --seed 1000000000000000000000000000000000",
     "at most 2**63 - 1, got a 34-digit number"),
    ("infralens.training.train_single_gpu --seed -1", "expected a non-negative integer, got -1"),
    ("infralens.training.train_single_gpu --lr inf", "finite positive number, got 'inf'"),
    ("infralens.training.train_single_gpu --lr nan", "finite positive number, got 'nan'"),
    ("infralens.training.train_single_gpu --lr=-1", "finite positive number, got '-1'"),
    ("infralens.training.train_single_gpu --lr 0", "finite positive number, got '0'"),
    ("infralens.training.train_single_gpu --lr fast", "expected a positive number, got 'fast'"),
    ("infralens.training.train_single_gpu --steps 0", "expected a positive integer, got 0"),
    (f"infralens.training.train_single_gpu --steps {HUGE}", "at most 2**63 - 1"),
    (f"infralens.training.train_single_gpu --vocab {HUGE}", "at most 2**63 - 1"),
    ("infralens.training.train_single_gpu --batch -2", "expected a positive integer, got -2"),
    ("infralens.training.train_single_gpu --seq-len 129", "longer than the model's 128 positions"),
    ("infralens.training.train_single_gpu --d-model 30", "not divisible"),
    ("infralens.training.train_single_gpu --device tpu", "device must be cpu or cuda"),
    pytest.param("infralens.training.train_single_gpu --device cuda", "no CUDA GPU", marks=NO_GPU),
    ("infralens.training.train_single_gpu --preset nosuch", "invalid choice: 'nosuch'"),
    ("infralens.training.train_single_gpu --frobnicate", "unrecognized arguments"),
    # torchrun commands: argument errors come before the process group is joined
    (f"{RANK0_OF_2} infralens.training.train_ddp --batch 1000", "each of 2 ranks reads 511"),
    ("infralens.training.train_ddp --batch 1024", "has 1,023 such windows"),
    ("infralens.training.train_ddp", "start this under torchrun"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --accum 0", "expected a positive integer, got 0"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --bucket-cap-mb inf", "finite positive number"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --bucket-cap-mb=-1", "finite positive number"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --save {{in}}/adir", "is a folder"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --save {{out}}/nodir/c.pt", "does not exist"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --lr inf", "finite positive number"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --seed {HUGE}", "at most 2**63 - 1"),
    (f"{RANK0_OF_2} infralens.training.train_ddp --device tpu", "device must be auto, cpu or cuda"),
    ("RANK=0 WORLD_SIZE=two LOCAL_RANK=0 MASTER_ADDR=x MASTER_PORT=1 infralens.training.train_ddp",
     "WORLD_SIZE='two'"),
    ("infralens.training.ddp_check", "required: --out"),
    (f"{RANK0_OF_2} infralens.training.ddp_check --out {{out}}/nodir/g.pt", "does not exist"),
    (f"{RANK0_OF_2} infralens.training.ddp_check --out {{in}}/adir", "is a folder"),
    ("infralens.training.ddp_check --out {out}/g.pt", "start this under torchrun"),
    (f"{RANK0_OF_2} infralens.training.ddp_overlap --out {{out}}/nodir/o.json", "does not exist"),
    (f"{RANK0_OF_2} infralens.training.ddp_overlap --warmup 1", "need --warmup >= 2"),
    (f"{RANK0_OF_2} infralens.training.ddp_overlap --warmup 0", "expected a positive integer, got 0"),
    (f"{RANK0_OF_2} infralens.training.ddp_overlap --profile-steps 0", "expected a positive integer"),
    (f"{RANK0_OF_2} infralens.training.ddp_overlap --lr nan", "finite positive number"),
    (f"{RANK0_OF_2} infralens.training.fsdp_shards --modes zero4", "modes must be among"),
    (f"{RANK0_OF_2} infralens.training.fsdp_shards --modes ,", "modes must be among"),
    (f"{RANK0_OF_2} infralens.training.fsdp_shards --out {{in}}/adir", "is a folder"),
    (f"{RANK0_OF_2} infralens.training.fsdp_shards --out {{out}}/nodir/m.json", "does not exist"),
    (f"{RANK0_OF_2} infralens.training.fsdp_shards --batch 5000", "has 2,047 such windows"),
    # python -m infralens.quant.compare: the plan file, its models, the device
    ("infralens.quant.compare {in}/none.yaml", "cannot read plan file"),
    ("infralens.quant.compare {in}/malformed.json", "not valid YAML"),
    ("infralens.quant.compare {in}/badplan.yaml", "method 'gptq' takes formats int8, int4"),
    ("infralens.quant.compare {in}/cluster.yaml", "unknown field 'gpu'"),
    ("infralens.quant.compare --plan nosuch", "no shipped plan 'nosuch'"),
    ("infralens.quant.compare --models nosuch", "the plan has no model 'nosuch'"),
    ("infralens.quant.compare --device tpu", "--device must be cpu or cuda"),
    ("infralens.quant.compare --out {out}/nodir/r.json", "does not exist"),
    pytest.param("infralens.quant.compare --device cuda", "no CUDA GPU", marks=NO_GPU),
    # python -m infralens.parallel.plan: model, cluster file, sizes and options
    ("infralens.parallel.plan --model llama-3-8b --cluster {in}/none.yaml --seq 8 --global-batch 8",
     "cannot read cluster file"),
    ("infralens.parallel.plan --model llama-3-8b --cluster {in}/malformed.json --seq 8 --global-batch 8",
     "not valid YAML"),
    ("infralens.parallel.plan --gpt 2,64 --cluster {in}/cluster.yaml --seq 8 --global-batch 8",
     "--gpt takes layers,hidden,heads"),
    ("infralens.parallel.plan --hf-config {in}/heads.json --cluster {in}/cluster.yaml --seq 8 "
     "--global-batch 8", "does not divide 'hidden_size'"),
    ("infralens.parallel.plan --model llama-3-8b --cluster {in}/cluster.yaml --seq 0 --global-batch 8",
     "expected a positive integer, got 0"),
    ("infralens.parallel.plan --model llama-3-8b --cluster {in}/cluster.yaml --seq 8 --global-batch 8 "
     "--zero 4", "--zero: expected ddp, 1, 2 or 3"),
    ("infralens.parallel.plan --model llama-3-8b --cluster {in}/badgpu.yaml --seq 8 --global-batch 8",
     "unknown gpu 'v100'"),
    ("infralens.parallel.tp_check", "required: --out"),
    ("infralens.parallel.tp_check --out {out}/t.json", "start this under torchrun"),
    (f"{RANK0_OF_2} infralens.parallel.tp_check --out {{out}}/t.json --hidden 30 --heads 4",
     "--heads 4 must divide --hidden 30"),
    (f"{RANK0_OF_2} infralens.parallel.tp_check --out {{in}}/adir", "is a folder"),
    ("infralens.parallel.pp_check --out {out}/p.json", "start this under torchrun"),
    (f"{RANK0_OF_2} infralens.parallel.pp_check --out {{out}}/p.json --microbatches 3",
     "--microbatches 3 must divide --batch 16"),
    (f"{RANK0_OF_2} infralens.parallel.collective_bench --out {{out}}/b.json --ops broadcast",
     "--ops: choose from"),
    (f"{RANK0_OF_2} infralens.parallel.collective_bench --out {{out}}/b.json --factor 1",
     "need --factor >= 2"),
    ("infralens.profiling.targets conv", "invalid choice: 'conv'"),
    pytest.param("infralens.profiling.targets add", "need a CUDA GPU", marks=NO_GPU),
]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): (b"" if p.is_dir() else p.read_bytes())
            for p in sorted(folder.rglob("*"))}


def _row_id(row) -> str:
    command = row.values[0] if hasattr(row, "values") else row[0]
    words = command.replace(HUGE, "<401 digits>").split()
    while "=" in words[0]:  # the environment is not part of the name
        words.pop(0)
    return " ".join(words).removeprefix("infralens.")


TEST_NAME = "test_every_command_line_refuses_bad_input_in_one_line"


def _run_row(command: str, inputs: Path, out: Path) -> subprocess.CompletedProcess:
    words = shlex.split(command.format(**{"in": inputs, "out": out}))
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRITON_INTERPRET", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR",
                        "MASTER_PORT")}  # the real compiler; no torchrun unless the row says so
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    return subprocess.run([sys.executable, "-m", *words], capture_output=True, text=True, env=env,
                          cwd=out, timeout=120)


@pytest.fixture(scope="module")
def outcomes(request, inputs, tmp_path_factory) -> dict[str, tuple]:
    """The selected rows, run a few at a time before the first is checked: most rows import torch
    (seconds each), so the table takes about the time of its rows divided by the workers."""
    from concurrent.futures import ThreadPoolExecutor

    commands = [item.callspec.params["command"] for item in request.session.items
                if getattr(item, "originalname", None) == TEST_NAME and item.module is request.module]
    snapshot = _files(inputs)

    def run(command: str) -> tuple:
        out = tmp_path_factory.mktemp("out")
        return _run_row(command, inputs, out), out

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1) + 1) as pool:
        done = dict(zip(commands, pool.map(run, commands), strict=True))
    return {"snapshot": snapshot, **done}


@pytest.mark.parametrize("command, fragment", BAD_INPUT, ids=[_row_id(r) for r in BAD_INPUT])
def test_every_command_line_refuses_bad_input_in_one_line(command, fragment, inputs, outcomes):
    done, out = outcomes[command]
    lines = done.stderr.splitlines()
    assert (done.returncode, done.stdout, len(lines)) == (2, "", 1), done.stderr[-3000:]
    prog = done.args[2]  # [python, -m, module, ...]
    assert lines[0].startswith((f"{prog}: error: ", f"python -m {prog}: error: ")), lines[0]
    assert fragment in lines[0], lines[0]
    assert _files(out) == {} and _files(inputs) == outcomes["snapshot"]  # nothing written or changed


def test_the_table_names_each_command_once_and_every_command_line():
    commands = [r.values[0] if hasattr(r, "values") else r[0] for r in BAD_INPUT]
    assert len(set(commands)) == len(commands)  # `outcomes` is keyed by the command
    covered = {_row_id(r).split()[0] for r in BAD_INPUT}
    package = SRC / "infralens"
    mains = {p for p in package.rglob("*.py") if re.search(r"^def main\(|^def _main\(|__name__ == .__main__.",
                                                            p.read_text(), re.MULTILINE)}
    mains = {".".join(p.relative_to(package).with_suffix("").parts) for p in mains}
    mains = {m.removesuffix(".__main__").replace("memory.cli", "memory") for m in mains}
    assert mains - covered == set(), "a command line with no row in BAD_INPUT"


def test_read_yaml_names_the_file_and_the_line(tmp_path):
    from infralens.tools.cli import read_yaml

    (tmp_path / "ok.yaml").write_text("a: [1, 2]\n")
    (tmp_path / "bad.yaml").write_text("a: 1\nb: [unclosed\n")
    assert read_yaml(tmp_path / "ok.yaml", LookupError, "demo file") == {"a": [1, 2]}
    with pytest.raises(LookupError, match=r"^demo file '.*bad.yaml' is not valid YAML \(line 3\)$"):
        read_yaml(tmp_path / "bad.yaml", LookupError, "demo file")
    with pytest.raises(LookupError, match="cannot read demo file '.*none.yaml': No such file"):
        read_yaml(tmp_path / "none.yaml", LookupError, "demo file")
