"""The GPU-cell runner: the cells of a test page, and chapter 1's GPU cells end to end against fakes.

Chapter 1's GPU cells run through the real runner (infralens.tools.cells.runner.run_cells), with the device
replaced: the ceilings are measured on the CPU at tiny sizes, the probe is FakeProbe, and the
provenance is fixed. The records land in a temporary book, and every CPU cell of the page then
runs against it, so a typo in a GPU cell or in the prose built from its record fails here, not on
the GPU machine or in the next build.
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import matplotlib
import pytest

from infralens.gpuarch import cache_sweep, ceilings, sm_probe
from infralens.gpuarch import occupancy_probe as op
from infralens.gpuarch.occupancy import Kernel
from infralens.tools.cells import parse, records, runner
from infralens.tools.glue import MissingRecord
from tests.gpuarch.fakes import FakeProbe, FakeSMProbe

matplotlib.use("Agg")
ROOT = Path(__file__).resolve().parents[3]
BOOK = ROOT / "book"
PAGE = "handbook/ch01-gpu-architecture"
CLOCKS = {"power_limit_w": 700.0, "power_w": 690.0, "sm_clock_max_mhz": 1980.0, "sm_clock_mhz": 1400.0,
          "temperature_c": 60.0}
PROV = {"gpu": "NVIDIA H100 80GB HBM3", "sm_count": 132, "driver": "580.159.04", "cuda": "13.0",
        "torch": "2.11.0+cu130", "triton": "3.6.0", "date": "2026-11-21T07:00:00Z",
        "commit": "0123456789abcdef", "dirty": False, "compute_capability": "9.0"}


@pytest.fixture()
def fake_gpu(monkeypatch):
    import torch

    from infralens.tools.cells import provenance

    real = ceilings.measure_ceilings
    monkeypatch.setattr(ceilings, "measure_ceilings", functools.partial(
        real, device="cpu", n=64, copy_bytes=1 << 16, sweep=(1, 8, 64), add_elements=4096, rep_ms=2))
    monkeypatch.setattr(ceilings, "sm_clock_under_load", lambda *a, **k: dict(CLOCKS))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: PROV["gpu"])
    monkeypatch.setattr(provenance, "collect", lambda root: dict(PROV))
    monkeypatch.setattr(op.Probe, "for_this_gpu", classmethod(lambda cls: FakeProbe()))
    if shutil.which("nvcc") is None:
        monkeypatch.setattr(op, "ptxas_report", lambda arch: {k: {"barriers": 1} for k in FakeProbe.kernels})
    # The probes added to chapter 1: clock telemetry, residency, FMA issue and the L2 sweep.
    monkeypatch.setattr(ceilings, "matmul_with_telemetry", _fake_telemetry)
    monkeypatch.setattr(ceilings, "smi_reader", lambda *a: (lambda: dict(CLOCKS)))
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: SimpleNamespace(
        multi_processor_count=132, L2_cache_size=50 * 2**20))
    monkeypatch.setattr(sm_probe.SMProbe, "for_this_gpu", classmethod(lambda cls: FakeSMProbe(132)))
    monkeypatch.setattr(sm_probe, "ffma_loop_mix", lambda arch: {
        "ffma": 16, "instructions": 19, "ops": ["FFMA"] * 16 + ["IADD3", "ISETP.NE.AND", "BRA"]})
    if shutil.which("nvcc") is None:
        monkeypatch.setattr(sm_probe, "resident_kernel", lambda threads, dyn, arch="sm_90": Kernel(
            threads, 16, 0, dyn, max_dynamic_smem_bytes=dyn or None))
    monkeypatch.setattr(cache_sweep, "sweep", _fake_l2_sweep)
    monkeypatch.setattr(cache_sweep, "profile_reads", _fake_l2_counters)


L2_BYTES, HBM_RATE, L2_RATE = 50 * 2**20, 3.1e12, 7.7e12


def _fake_telemetry(n=ceilings.DEFAULT_N, repeats=5, **k):
    """A model GPU warming up: the power rises to its limit and the clock falls, then holds
    (measure_with_telemetry itself is tested in tests/gpuarch/test_ceilings.py)."""
    clocks, watts = [1980, 1530, 1500] + [1410] * (repeats - 3), [100, 400, 600] + [700] * (repeats - 3)
    rate = {1980: 760e12, 1530: 690e12, 1500: 680e12, 1410: 700e12}

    def summary(v):
        return {"min": v, "median": v, "max": v, "n": 4}
    runs = [{"ms": 1.0, "flops_per_s": rate[c], "sm_clock_mhz": summary(float(c)),
             "power_w": summary(float(w))} for c, w in zip(clocks, watts, strict=True)]
    rates = [r["flops_per_s"] for r in runs]
    return {"n": n, "dtype": "bfloat16", "device": "cuda", "runs": runs, "interval_s": 0.05,
            "flops_per_s": summary(rates[-1]), "spread": (max(rates) - min(rates)) / rates[-1],
            "sm_clock_mhz": summary(1410.0), "power_w": summary(700.0)}


def _fake_l2_run(mib: int) -> dict:
    """One working set on a model GPU: L2 rate while the buffer fits, HBM rate beyond."""
    plan = cache_sweep.plan(mib << 20, cache_sweep.DEFAULT_TOTAL_MIB << 20, 8 * 132)
    rate = L2_RATE if mib << 20 <= L2_BYTES * 1.3 else HBM_RATE
    ms = plan["bytes_read"] / rate * 1e3
    return {**plan, "ms": ms, "bytes_per_s": rate}


def _fake_l2_sweep(sizes_mib=cache_sweep.DEFAULT_SIZES_MIB, *a, **k):
    return [_fake_l2_run(m) for m in sizes_mib]


def _fake_l2_counters(sizes_mib, *a, **k):
    runs = {}
    for mib in sizes_mib:
        run = _fake_l2_run(mib)
        fits = mib << 20 <= L2_BYTES * 1.3
        dram = run["working_set_bytes"] if fits else run["bytes_read"]
        l2_read = run["bytes_read"] * (0.5 if mib < 4 else 1.0)   # small buffers: reads merged
        counters = {"dram__bytes_read.sum": dram, "lts__t_sectors_srcunit_tex_op_read.sum": l2_read / 32,
                    "lts__t_sector_op_read_hit_rate.pct": 99.0 if fits else 0.0,
                    "lts__t_sectors_srcunit_ltcfabric.sum": (run["working_set_bytes"] if fits
                                                             else l2_read / 2) / 32}
        if mib == 64:  # beyond the L2, but much of it kept from pass to pass
            counters["dram__bytes_read.sum"] = dram = 0.4 * run["bytes_read"]
        runs[str(mib)] = {"working_set_bytes": mib << 20, "counters": counters,
                          "l2_read_bytes": l2_read, "dram_read_bytes": dram}
    return {"runs": runs, "ncu_version": "fake", "missing": []}


def _cpu_cells(text: str):
    return [c for c in parse.parse_cells(text, PAGE) if not c.is_gpu]


def test_gpu_cells_record_and_the_prose_reads_the_records(tmp_path, monkeypatch, fake_gpu):
    book = tmp_path / "book"
    gpu = [c for c in parse.gpu_cells(BOOK) if c.page == PAGE]
    assert {c.record for c in gpu} == {"ch01-roofline", "ch01-clock-telemetry", "ch01-occupancy-check",
                                       "ch01-residency", "ch01-latency", "ch01-ffma-issue",
                                       "ch01-l2-bandwidth"}
    written, failures = runner.run_cells(gpu, book)
    assert not failures, failures
    assert len(written) == len(gpu)
    roof = records.latest("ch01-roofline", book)
    assert roof.figures and roof.results["datasheet"]["gpu"] == "h100"
    occ = records.latest("ch01-occupancy-check", book)
    assert occ.results["matches"] == occ.results["total"] == len(op.CASES)

    # Now the page's CPU cells, against these records (glue captured instead of displayed):
    # every glue key the page's prose uses must be provided.
    glued: dict[str, str] = {}
    import myst_nb
    from infralens_book.page_check import used_glue_keys

    monkeypatch.setattr(myst_nb, "glue", lambda k, v, display=True: glued.__setitem__(k, v))
    monkeypatch.setenv("INFRALENS_BOOK", str(book))
    text = (BOOK / f"{PAGE}.md").read_text(encoding="utf-8")
    ns = {"__name__": "ch01_page", "display": lambda *a, **k: None}
    for cell in _cpu_cells(text):
        exec(compile(cell.source, f"{PAGE}.md:{cell.line}", "exec"), ns)  # noqa: S102
    import matplotlib.pyplot as plt

    plt.close("all")
    assert used_glue_keys(text) <= set(glued), sorted(used_glue_keys(text) - set(glued))


def test_a_page_that_quotes_a_missing_record_stops_with_the_command_that_makes_it(tmp_path,
                                                                                  monkeypatch):
    import myst_nb

    monkeypatch.setattr(myst_nb, "glue", lambda k, v, display=True: None)
    monkeypatch.setenv("INFRALENS_BOOK", str(tmp_path / "empty-book"))
    ns = {"__name__": "ch01_page", "display": lambda *a, **k: None}
    with pytest.raises(MissingRecord, match=r"python -m infralens\.tools\.cells run --record ch01-"):
        for cell in _cpu_cells((BOOK / f"{PAGE}.md").read_text(encoding="utf-8")):
            exec(compile(cell.source, f"{PAGE}.md:{cell.line}", "exec"), ns)  # noqa: S102
    import matplotlib.pyplot as plt

    plt.close("all")


# --- the runner on a page written for the test --------------------------------------------------

TOP = "---\njupytext:\n  text_representation:\n    format_name: myst\n---\n"


def cell(record: str | None, source: str) -> str:
    options = ":tags: [gpu]\n" + (f":record: {record}\n" if record else "")
    return f"```{{code-cell}} ipython3\n{options}{source}\n```\n\n"


def demo_book(tmp_path: Path, *cells: str) -> Path:
    book = tmp_path / "book"
    (book / "labs").mkdir(parents=True)
    (book / "labs" / "demo.md").write_text(TOP + "\n# Demo\n\n" + "".join(cells))
    return book


@pytest.fixture()
def fixed_provenance(monkeypatch):
    from infralens.tools.cells import provenance

    monkeypatch.setattr(provenance, "collect", lambda root: dict(PROV))


def test_cells_of_a_page_share_a_namespace_and_each_writes_its_record(tmp_path, fixed_provenance, capsys):
    book = demo_book(
        tmp_path,
        cell("demo-first", "n = 21\nprint('first says', n)\nresults = {'n': n}"),
        cell("demo-second", "results = {'twice': 2 * n}\nprint('second')"),  # n from the cell above
        cell("demo-third", "print('no results this time')"),  # `results` does not leak from above
    )
    written, failures = runner.run_cells(parse.gpu_cells(book), book)
    assert failures == [] and [w.parent.name for w in written] == ["demo-first", "demo-second", "demo-third"]
    first, second, third = (records.latest(r, book) for r in ("demo-first", "demo-second", "demo-third"))
    assert first.results == {"n": 21} and first.stdout == "first says 21\n"
    assert second.results == {"twice": 42} and third.results == {}
    assert first.provenance == PROV and first.page == "labs/demo"
    assert first.is_current("n = 21\nprint('first says', n)\nresults = {'n': n}")
    assert "first says 21" in capsys.readouterr().out  # shown live as well


def test_failing_cells_write_nothing_and_the_others_still_run(tmp_path, fixed_provenance, capsys):
    book = demo_book(
        tmp_path,
        cell("demo-raises", "1 / 0"),
        cell(None, "print('a gpu cell without a record')"),
        cell("demo-nan", "results = {'x': float('nan')}"),
        cell("demo-fine", "results = {'ok': True}"),
    )
    written, failures = runner.run_cells(parse.gpu_cells(book), book)
    assert [w.parent.name for w in written] == ["demo-fine"]
    assert len(failures) == 3
    assert "cell demo-raises failed (no record written)" in failures[0]
    assert failures[1].startswith("labs/demo.md:")
    assert failures[1].endswith("a gpu cell needs ':record: <id>'")
    assert "cell demo-nan failed" in failures[2]
    assert records.latest("demo-raises", book) is None and records.latest("demo-nan", book) is None
    assert "ZeroDivisionError" in capsys.readouterr().err  # the traceback is shown


def test_open_figures_are_saved_in_three_formats_and_closed(tmp_path, fixed_provenance):
    import matplotlib.pyplot as plt

    book = demo_book(tmp_path, cell("demo-fig", "import matplotlib.pyplot as plt\n"
                                                 "plt.plot([0, 1], [1, 0])\nplt.figure()\nplt.plot([1, 2])"))
    runner.run_cells(parse.gpu_cells(book), book)
    rec = records.latest("demo-fig", book)
    assert rec.figures == ["fig-1", "fig-2"] and plt.get_fignums() == []
    for stem in rec.figures:
        assert (rec.path / f"{stem}.svg").read_bytes().lstrip().startswith((b"<?xml", b"<svg"))
        assert (rec.path / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
        assert (rec.path / f"{stem}.png").read_bytes().startswith(b"\x89PNG")


def test_select_by_page_and_record(tmp_path):
    book = demo_book(tmp_path, cell("demo-a", "a = 1"), cell("demo-b", "b = 2"))
    (book / "handbook").mkdir()
    (book / "handbook" / "ch09.md").write_text(TOP + cell("ch09-c", "c = 3"))
    assert [c.record for c in runner.select(book, None, None)] == ["ch09-c", "demo-a", "demo-b"]
    assert [c.record for c in runner.select(book, "labs", None)] == ["demo-a", "demo-b"]
    assert [c.record for c in runner.select(book, None, "demo-b")] == ["demo-b"]
    assert [c.record for c in runner.select(book, None, ["demo-b", "ch09-c"])] == ["ch09-c", "demo-b"]
    assert runner.select(book, "handbook", "demo-a") == []


def test_pack_and_unpack_carry_the_records_to_another_book(tmp_path, fixed_provenance):
    import tarfile

    book = demo_book(tmp_path, cell("demo-a", "results = {'a': 1}"), cell("demo-b", "results = {'b': 2}"))
    written, _ = runner.run_cells(parse.gpu_cells(book), book)
    archive = tmp_path / "out" / "records.tar.gz"
    runner.pack(written, book, archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert sorted(n for n in names if n.endswith("record.json")) == [
        f"{w.parent.name}/{w.name}/record.json" for w in written]
    other = tmp_path / "other"
    assert runner.unpack(archive, other) == [f"{w.parent.name}/{w.name}" for w in written]
    assert records.latest("demo-b", other).results == {"b": 2}
    assert set(json.loads(records.index_path(other).read_text())) == {"demo-a", "demo-b"}


@pytest.mark.parametrize("arcname, link", [("../escape.txt", None), ("Bad_Id/run/record.json", None),
                                           ("demo/run/deeper/record.json", None),
                                           ("demo/run/record.json", "/etc/passwd")])
def test_unpack_refuses_anything_but_record_files(tmp_path, arcname, link):
    import io
    import tarfile

    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        member = tarfile.TarInfo(arcname)
        if link:  # a symbolic link is not a plain file
            member.type, member.linkname = tarfile.SYMTYPE, link
            tar.addfile(member)
        else:
            member.size = 2
            tar.addfile(member, io.BytesIO(b"{}"))
    with pytest.raises(ValueError, match="unexpected member"):
        runner.unpack(archive, tmp_path / "book")
    assert not (tmp_path / "book" / "_records").exists() and not (tmp_path / "escape.txt").exists()


# --- unpack: the whole archive checked first, each run moved into place whole -------------------

def _good_archive(tmp_path, fixed_provenance) -> tuple[Path, list[str]]:
    book = demo_book(tmp_path / "gpu", cell("demo-a", "results = {'a': 1}"),
                     cell("demo-b", "results = {'b': 2}"))
    written, _ = runner.run_cells(parse.gpu_cells(book), book)
    archive = tmp_path / "records.tar.gz"
    runner.pack(written, book, archive)
    return archive, [f"{w.parent.name}/{w.name}" for w in written]


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): b"" if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))} if folder.exists() else {}


def test_check_archive_lists_the_runs_and_unpack_replaces_a_run_whole(tmp_path, fixed_provenance):
    archive, runs = _good_archive(tmp_path, fixed_provenance)
    assert runner.check_archive(archive) == runs
    book = tmp_path / "book"
    assert runner.unpack(archive, book) == runs
    first = _tree(book / "_records")
    assert runner.unpack(archive, book) == runs  # the same runs again: swapped whole, no leftovers
    assert _tree(book / "_records") == first
    assert not [p for p in (book / "_records").iterdir() if p.name.startswith(".")]


def _rewrite(archive: Path, out: Path, change) -> Path:
    """A copy of ``archive`` whose record.json members went through ``change(bytes) -> bytes``."""
    import io
    import tarfile

    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if data is not None and m.name.endswith("record.json"):
                data = change(data)
                m.size = len(data)
            dst.addfile(m, io.BytesIO(data) if data is not None else None)
    return out


@pytest.mark.parametrize("damage, words", [
    ("truncate", "not a readable .tar.gz"),
    ("record", "not a JSON record"),
    ("field", "no 'provenance'"),
])
def test_a_bad_archive_writes_nothing_at_all(tmp_path, fixed_provenance, damage, words):
    archive, _ = _good_archive(tmp_path, fixed_provenance)
    book = tmp_path / "book"
    records.write("demo-a", "labs/demo", "x", {**PROV, "date": "2026-01-01T00:00:00Z"}, {}, "", {}, 0.0,
                  book)
    before = _tree(book)
    if damage == "truncate":
        bad = tmp_path / "bad.tar.gz"
        whole = archive.read_bytes()
        bad.write_bytes(whole[: len(whole) - 40])  # the end of the last member and the trailer
    elif damage == "record":  # the second run's record.json only: the first run is fine
        seen: list[bytes] = []

        def second_cut_short(data: bytes) -> bytes:
            seen.append(data)
            return data[:-5] if len(seen) == 2 else data

        bad = _rewrite(archive, tmp_path / "bad.tar.gz", second_cut_short)
    else:
        bad = _rewrite(archive, tmp_path / "bad.tar.gz",
                       lambda b: json.dumps({k: v for k, v in json.loads(b).items()
                                             if k != "provenance"}).encode())
    with pytest.raises(runner.ArchiveError, match=words):
        runner.unpack(bad, book)
    assert _tree(book) == before  # no half-written records folder, no new index


def test_unpack_refuses_to_index_over_a_malformed_record_already_there(tmp_path, fixed_provenance):
    archive, _ = _good_archive(tmp_path, fixed_provenance)
    book = tmp_path / "book"
    broken = book / "_records" / "old-cell" / "run"
    broken.mkdir(parents=True)
    (broken / "record.json").write_text("{")
    before = _tree(book)
    with pytest.raises(records.RecordError, match="old-cell/run/record.json"):
        runner.unpack(archive, book)
    assert _tree(book) == before
