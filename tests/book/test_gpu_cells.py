"""GPU cells: found the same way on both machines, recorded atomically, shown in the CPU build."""

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from infralens_book import notebooks

from infralens.tools.cells import parse, records, runner

ROOT = Path(__file__).resolve().parents[2]
BOOK = ROOT / "book"
PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef", "dirty": False}


def test_the_runner_finds_the_cells_myst_nb_reads():
    """The GPU machine parses pages without myst-nb; both readings must agree cell for cell."""
    from myst_nb.core.read import read_myst_markdown_notebook

    pages = parse.book_pages(BOOK)
    assert pages, "the book has executed pages"
    for page in pages:
        text = page.read_text(encoding="utf-8")
        ours = parse.parse_cells(text)
        theirs = [c for c in read_myst_markdown_notebook(text).cells if c.cell_type == "code"]
        assert [c.source for c in ours] == [c.source for c in theirs], page
        assert [c.tags for c in ours] == [list(c.metadata.get("tags", [])) for c in theirs], page
        assert [c.record for c in ours] == [c.metadata.get("record") for c in theirs], page


def test_every_gpu_cell_names_a_unique_valid_record():
    found = parse.gpu_cells(BOOK)
    ids = [c.record for c in found]
    assert all(ids) and len(ids) == len(set(ids))
    assert all(records.RECORD_ID.match(i) for i in ids)


def test_committed_records_are_complete():
    for cell in parse.gpu_cells(BOOK):
        for rec in records.runs(cell.record, BOOK):
            for key in ("gpu", "sm_count", "driver", "cuda", "torch", "triton", "date", "commit"):
                assert rec.provenance.get(key), (rec.path, key)
            for stem in rec.figures:
                assert all((rec.path / f"{stem}.{ext}").is_file() for ext in ("svg", "pdf", "png"))


def test_write_latest_pack_unpack_round_trip(tmp_path):
    book_a, book_b = tmp_path / "a", tmp_path / "b"
    first = records.write("demo-cell", "labs/x", "print(1)", PROV, {"gbps": 1.5}, "1\n",
                          {"fig-1": {"svg": b"<svg/>", "pdf": b"%PDF", "png": b"png"}}, 0.1, book_a)
    later = dict(PROV, date="2026-11-22T07:00:00Z")
    second = records.write("demo-cell", "labs/x", "print(2)", later, {"gbps": 2.5}, "2\n", {},
                           0.1, book_a)
    rec = records.latest("demo-cell", book_a)
    assert rec.path == second and rec.results == {"gbps": 2.5}
    assert rec.is_current("print(2)") and not rec.is_current("print(1)")
    assert "132 SMs" in rec.provenance_line and "0123456789" in rec.provenance_line
    archive = tmp_path / "out" / "records.tar.gz"
    runner.pack([first, second], book_a, archive)
    runner.unpack(archive, book_b)
    assert [r.results for r in records.runs("demo-cell", book_b)] == [{"gbps": 1.5}, {"gbps": 2.5}]
    index = json.loads(records.index_path(book_b).read_text())
    assert index["demo-cell"]["run"] == second.name


def test_unpack_rejects_paths_outside_the_records(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    payload = tmp_path / "payload"
    payload.write_text("x")
    with tarfile.open(evil, "w:gz") as tar:
        tar.add(payload, arcname="../../escape.txt")
    with pytest.raises(ValueError):
        runner.unpack(evil, tmp_path / "book")
    assert not (tmp_path / "escape.txt").exists()


def test_a_failing_write_leaves_nothing_behind(tmp_path):
    with pytest.raises(ValueError):
        records.write("demo", "p", "x", PROV, {"bad": float("nan")}, "", {}, 0.0, tmp_path)
    assert not any((tmp_path / "_records").rglob("record.json"))


def test_the_cpu_build_marks_gpu_cells_and_shows_records(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1"),
                nbformat.v4.new_code_cell("y = 2", metadata={"tags": ["gpu"], "record": "demo"})]
    out = notebooks.transform(nb, "page.md", tmp_path)
    assert out.cells[1].metadata["tags"] == ["gpu", "skip-execution"]
    assert "not measured yet" in out.cells[2].source
    assert notebooks.FINGERPRINT_KEY in out.cells[0].metadata
    records.write("demo", "page", "y = 2", PROV, {}, "measured 42\n", {}, 0.0, tmp_path)
    nb.cells = nb.cells[:2]
    shown = notebooks.transform(nb, "page.md", tmp_path).cells[2].source
    assert "measured 42" in shown and "132 SMs" in shown and "has changed" not in shown


def test_a_malformed_record_is_one_warning_naming_its_file(tmp_path, caplog):
    broken = tmp_path / "_records" / "demo" / "run"
    broken.mkdir(parents=True)
    (broken / "record.json").write_text('{"record": "demo"')  # cut short
    shown = notebooks.record_markdown("demo", "y = 2", tmp_path)  # the build goes on, and fails (-W)
    assert shown.startswith(":::{error}") and str(broken / "record.json") in shown
    warned = [r.getMessage() for r in caplog.records if "record.json" in r.getMessage()]
    assert len(warned) == 1 and str(broken / "record.json") in warned[0] and "\n" not in warned[0]


@pytest.mark.parametrize("command", [["check-cuda"], ["run"]])
def test_no_cuda_one_line_exit_2(command):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    done = subprocess.run([sys.executable, "-m", "infralens.tools.cells", *command],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert "CUDA" in done.stderr
