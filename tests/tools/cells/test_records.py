"""GPU records on disk: the folder layout and JSON written, the latest run found, the index."""

from __future__ import annotations

import hashlib
import json

import pytest

from infralens.tools.cells import records

PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef", "dirty": False}
FIGS = {"fig-1": {"svg": b"<svg/>", "pdf": b"%PDF-1.4", "png": b"\x89PNG"}}


def test_write_lays_out_one_folder_per_run(tmp_path):
    folder = records.write("demo-cell", "labs/x", "  print(1)\n", PROV, {"gbps": 1.5}, "1\n", FIGS,
                           0.25, tmp_path)
    # book/_records/<record>/<date without - and :>-<gpu slug>/
    assert folder == tmp_path / "_records" / "demo-cell" / "20261121T070000Z-nvidia-h100-80gb-hbm3"
    data = json.loads((folder / "record.json").read_text(encoding="utf-8"))
    assert data == {"record": "demo-cell", "page": "labs/x",
                    "cell_sha256": hashlib.sha256(b"print(1)").hexdigest(),  # stripped source
                    "provenance": PROV, "results": {"gbps": 1.5}, "stdout": "1\n",
                    "figures": ["fig-1"], "seconds": 0.25}
    assert {p.name for p in folder.iterdir()} == {"record.json", "fig-1.svg", "fig-1.pdf", "fig-1.png"}
    assert (folder / "fig-1.png").read_bytes() == b"\x89PNG"
    assert not list(folder.parent.glob(".partial-*"))


def test_the_record_reads_back(tmp_path):
    records.write("demo-cell", "labs/x", "print(1)", PROV, {"gbps": 1.5}, "1\n", FIGS, 0.25, tmp_path)
    rec = records.latest("demo-cell", tmp_path)
    assert (rec.record, rec.page, rec.results, rec.stdout, rec.figures, rec.seconds) == (
        "demo-cell", "labs/x", {"gbps": 1.5}, "1\n", ["fig-1"], 0.25)
    assert rec.is_current("\nprint(1)  \n") and not rec.is_current("print(2)")
    assert rec.provenance_line.startswith("NVIDIA H100 80GB HBM3 · 132 SMs")


def test_latest_is_the_newest_date_and_missing_is_none(tmp_path):
    assert records.latest("demo-cell", tmp_path) is None and records.runs("demo-cell", tmp_path) == []
    for day, gpu in (("22", "NVIDIA H200"), ("20", "NVIDIA H100 80GB HBM3"), ("21", "NVIDIA B200")):
        records.write("demo-cell", "p", f"# {day}", dict(PROV, date=f"2026-11-{day}T00:00:00Z", gpu=gpu),
                      {"day": day}, "", {}, 0.0, tmp_path)
    assert [r.results["day"] for r in records.runs("demo-cell", tmp_path)] == ["20", "21", "22"]
    assert records.latest("demo-cell", tmp_path).provenance["gpu"] == "NVIDIA H200"


def test_a_rerun_with_the_same_stamp_replaces_its_folder(tmp_path):
    first = records.write("demo-cell", "p", "a", PROV, {"n": 1}, "", FIGS, 0.0, tmp_path)
    second = records.write("demo-cell", "p", "b", PROV, {"n": 2}, "", {}, 0.0, tmp_path)
    assert first == second and [r.results for r in records.runs("demo-cell", tmp_path)] == [{"n": 2}]
    assert not (second / "fig-1.png").exists()


def test_the_index_lists_the_latest_run_of_every_record(tmp_path):
    records.write("a-cell", "p", "x", PROV, {}, "", {}, 0.0, tmp_path)
    later = dict(PROV, date="2026-12-01T00:00:00Z")
    newest = records.write("a-cell", "p", "x", later, {}, "", {}, 0.0, tmp_path)
    records.write("b-cell", "p", "y", PROV, {}, "", {}, 0.0, tmp_path)
    index = json.loads(records.index_path(tmp_path).read_text(encoding="utf-8"))
    line_a = records.latest("a-cell", tmp_path).provenance_line
    line_b = records.latest("b-cell", tmp_path).provenance_line
    assert index == {"a-cell": {"run": newest.name, "provenance": line_a},
                     "b-cell": {"run": "20261121T070000Z-nvidia-h100-80gb-hbm3", "provenance": line_b}}
    assert "2026-12-01" in line_a and "2026-11-21" in line_b
    assert records.index_path(tmp_path) == tmp_path / "_records" / "index.json"


@pytest.mark.parametrize("bad", ["", "Upper", "-lead", "under_score", "dot.ted", "sp ace", "../up"])
def test_record_ids_are_lowercase_letters_digits_and_hyphens(bad, tmp_path):
    with pytest.raises(ValueError, match="use lowercase letters, digits and hyphens"):
        records.write(bad, "p", "x", PROV, {}, "", {}, 0.0, tmp_path)
    assert not (tmp_path / "_records").exists()


def test_results_that_are_not_json_leave_nothing(tmp_path):
    with pytest.raises(ValueError):
        records.write("demo", "p", "x", PROV, {"bad": float("inf")}, "", {}, 0.0, tmp_path)
    with pytest.raises(TypeError):
        records.write("demo", "p", "x", PROV, {"bad": object()}, "", {}, 0.0, tmp_path)
    assert not list(tmp_path.rglob("record.json")) and not list(tmp_path.rglob(".partial-*"))


def test_the_book_folder_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_BOOK", str(tmp_path / "other"))
    assert records.book_dir() == tmp_path / "other"
    assert records.records_dir() == tmp_path / "other" / "_records"
    monkeypatch.delenv("INFRALENS_BOOK")
    assert records.book_dir() == records.ROOT / "book" and (records.ROOT / "src" / "infralens").is_dir()


# --- malformed records: one error naming the file -------------------------------------------------

def _by_hand(book, record_id: str, text: str, run: str = "run"):
    folder = book / "_records" / record_id / run
    folder.mkdir(parents=True)
    (folder / "record.json").write_text(text)
    return folder / "record.json"


def _json(**changes) -> str:
    data = {"record": "demo-cell", "page": "labs/x", "cell_sha256": "0" * 64, "provenance": PROV,
            "results": {}, "stdout": "", "figures": [], "seconds": 1.0, **changes}
    return json.dumps({k: v for k, v in data.items() if v is not None})


@pytest.mark.parametrize("text, words", [
    ('{"record": "demo-cell", ', "not a JSON record"),
    ("[1, 2]", "a JSON list, not an object"),
    (_json(results=None), "no 'results'"),
    (_json(results=[1]), "'results' is a list, not a dict"),
    (_json(provenance={**PROV, "driver": None}), "provenance 'driver' is missing"),
    (_json(provenance={**PROV, "date": 20261121}), "'date' and 'commit' must be strings"),
    (_json(figures=["../escape"]), "plain file stems"),
    (_json(seconds="fast"), "'seconds' is not a number"),
    (_json(record="other-cell"), "it says record 'other-cell'"),
    (_json(record="Bad_Id"), "record id 'Bad_Id'"),
])
def test_a_malformed_record_raises_one_line_naming_its_file(tmp_path, text, words):
    path = _by_hand(tmp_path, "demo-cell", text)
    for read in (lambda: records.latest("demo-cell", tmp_path), lambda: records.update_index(tmp_path)):
        with pytest.raises(records.RecordError) as info:
            read()
        assert str(info.value).startswith(f"{path}: ") and words in str(info.value)
        assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError) and not records.index_path(tmp_path).exists()


def test_parse_record_accepts_what_write_writes(tmp_path):
    folder = records.write("demo-cell", "labs/x", "x = 1", PROV, {"v": 1}, "out\n", FIGS, 0.5, tmp_path)
    data = records.parse_record((folder / "record.json").read_bytes(), "here")
    assert data["results"] == {"v": 1} and data["figures"] == ["fig-1"]


def test_runs_skip_a_folder_still_being_written(tmp_path):
    records.write("demo-cell", "labs/x", "x = 1", PROV, {}, "", {}, 0.0, tmp_path)
    _by_hand(tmp_path, "demo-cell", "{half", run=".partial-abc")  # a write in progress
    assert len(records.runs("demo-cell", tmp_path)) == 1
    assert set(records.index_entries(tmp_path)) == {"demo-cell"}
