"""python -m infralens.tools.cells: list, unpack and run, with one error line for what cannot be done."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from infralens.tools.cells import records
from infralens.tools.cells.__main__ import cuda_problem, main

TOP = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n"
PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef", "dirty": False}


def demo_book(tmp_path: Path) -> Path:
    book = tmp_path / "book"
    (book / "labs").mkdir(parents=True)
    (book / "labs" / "demo.md").write_text(
        TOP + "\n# Demo\n\n```{code-cell} ipython3\n:tags: [gpu]\n:record: demo-cell\nx = 1\n```\n")
    return book


def no_cuda() -> bool:
    torch = pytest.importorskip("torch")
    return not torch.cuda.is_available()


def one_error_line(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("infralens.tools.cells: error: "), err
    for word in words:
        assert word in lines[0], (word, lines[0])


def test_list_shows_each_cell_and_its_record(tmp_path, capsys):
    book = demo_book(tmp_path)
    assert main(["--book", str(book), "list"]) == 0
    assert capsys.readouterr().out == "demo-cell\tlabs/demo.md:9\tnot measured yet\n"
    records.write("demo-cell", "labs/demo", "x = 0", PROV, {}, "", {}, 0.0, book)  # older source
    assert main(["--book", str(book), "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("demo-cell\tlabs/demo.md:9\tNVIDIA H100 80GB HBM3 · 132 SMs")
    assert out.rstrip().endswith("[cell changed since]")


def demo_archive(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A record of demo-cell packed as ``records.tar.gz``, the way a GPU run sends its records
    back, and an empty book folder to unpack it into: ``(archive, record folder, target)``."""
    folder = records.write("demo-cell", "labs/demo", "x = 1", PROV, {"v": 7}, "", {}, 0.0,
                           demo_book(tmp_path))
    archive = tmp_path / "records.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(folder, arcname=f"demo-cell/{folder.name}")
    target = tmp_path / "target"
    target.mkdir()
    return archive, folder, target


def test_unpack_an_archive_and_refuse_a_bad_one(tmp_path, capsys):
    archive, folder, target = demo_archive(tmp_path)
    assert main(["--book", str(target), "unpack", str(archive)]) == 0
    assert capsys.readouterr().out == f"unpacked demo-cell/{folder.name}\n"
    assert records.latest("demo-cell", target).results == {"v": 7}
    assert main(["--book", str(target), "unpack", str(tmp_path / "missing.tar.gz")]) == 2
    one_error_line(capsys.readouterr().err, "archive not found", "missing.tar.gz")
    not_a_tar = tmp_path / "not-a.tar.gz"
    not_a_tar.write_text("hello")
    assert main(["--book", str(target), "unpack", str(not_a_tar)]) == 2
    one_error_line(capsys.readouterr().err, "not-a.tar.gz")


def test_a_missing_book_folder_is_one_line(tmp_path, capsys):
    assert main(["--book", str(tmp_path / "nowhere"), "list"]) == 2
    one_error_line(capsys.readouterr().err, "book folder not found")


@pytest.mark.parametrize("command", [["check-cuda"], ["run"], ["run", "--record", "demo-cell"]])
def test_without_cuda_run_and_check_fail_in_one_line(tmp_path, capsys, command):
    if not no_cuda():
        pytest.skip("this machine has CUDA")
    assert main(["--book", str(demo_book(tmp_path)), *command]) == 2
    one_error_line(capsys.readouterr().err, "CUDA")
    assert cuda_problem() is not None


def test_no_matching_cells_is_one_line(tmp_path, capsys, monkeypatch):
    import infralens.tools.cells.__main__ as cli

    monkeypatch.setattr(cli, "cuda_problem", lambda: None)  # as on a GPU machine
    assert main(["--book", str(demo_book(tmp_path)), "run", "--record", "no-such-cell"]) == 2
    one_error_line(capsys.readouterr().err, "no GPU cells match")


def test_help_works_anywhere():
    done = subprocess.run([sys.executable, "-m", "infralens.tools.cells", "--help"],
                          capture_output=True, text=True)
    assert done.returncode == 0 and "check-cuda" in done.stdout and "unpack" in done.stdout


def test_a_malformed_record_on_disk_is_one_line_naming_the_file(tmp_path, capsys):
    book = demo_book(tmp_path)
    broken = book / "_records" / "demo-cell" / "run"
    broken.mkdir(parents=True)
    (broken / "record.json").write_text('{"record": "demo-cell"}')
    assert main(["--book", str(book), "list"]) == 2
    one_error_line(capsys.readouterr().err, str(broken / "record.json"), "no 'page'")


@pytest.mark.parametrize("argv, words", [(["unpack"], "required: archive"),
                                         (["frobnicate"], "invalid choice"),
                                         (["list", "--x"], "unrecognized arguments: --x")])
def test_argument_errors_are_one_line_without_usage(tmp_path, capsys, argv, words):
    assert main(["--book", str(demo_book(tmp_path)), *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "usage:" not in err
    one_error_line(err, words)


def test_unpack_checks_the_whole_archive_first(tmp_path, capsys):
    archive, _, target = demo_archive(tmp_path)
    whole = archive.read_bytes()
    truncated = tmp_path / "truncated.tar.gz"
    truncated.write_bytes(whole[: len(whole) // 2])
    assert main(["--book", str(target), "unpack", str(truncated)]) == 2
    one_error_line(capsys.readouterr().err, "truncated.tar.gz", "not a readable .tar.gz")
    assert list(target.iterdir()) == []  # nothing extracted, no index
    assert main(["--book", str(target), "unpack", str(tmp_path)]) == 2
    one_error_line(capsys.readouterr().err, "is a folder")
