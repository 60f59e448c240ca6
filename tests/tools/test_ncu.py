"""Nsight Compute from Python: its CSV read back, and a profile run through a stand-in ncu."""

import json
import stat
import sys

import pytest

from infralens.tools import ncu

NCU_HEADER = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
              "Block Size", "Grid Size", "Device", "CC", "Section Name", "Metric Name",
              "Metric Unit", "Metric Value")
SHARED_LD = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"


def ncu_row(launch: str, kernel: str, metric: str, value: str, unit: str = "") -> str:
    fields = (launch, "4242", "python3.12", "127.0.0.1", kernel, "1", "7", "(32, 32, 1)",
              "(129, 129, 1)", "0", "9.0", "Command line profiler metrics", metric, unit, value)
    return ",".join(f'"{f}"' for f in fields)


NCU_SAMPLE = "\n".join([
    "==PROF== Connected to process 4242 (/usr/bin/python3.12)",
    ",".join(f'"{h}"' for h in NCU_HEADER),
    ncu_row("0", "transpose_tile32", SHARED_LD, "16,515,072"),
    ncu_row("0", "transpose_tile32", "smsp__thread_inst_executed_per_inst_executed.ratio", "31.52"),
    ncu_row("1", "transpose_tile33(const float *, float *, int, int)", SHARED_LD, "0"),
    ncu_row("2", "transpose_tile33", SHARED_LD, "7"),
    ncu_row("3", "copy_tile", "gpu__time_duration.sum", "n/a", "nsecond"),
    "==PROF== Disconnected from process 4242",
])


def test_parse_ncu_csv():
    got = ncu.parse_ncu_csv(NCU_SAMPLE)
    assert got["transpose_tile32"] == {
        SHARED_LD: 16515072.0, "smsp__thread_inst_executed_per_inst_executed.ratio": 31.52}
    # the signature is cut off, and a second launch of the same kernel is ignored
    assert got["transpose_tile33"] == {SHARED_LD: 0.0}
    assert got["copy_tile"] == {"gpu__time_duration.sum": None}
    assert ncu.parse_ncu_csv("==PROF== nothing profiled\n") == {}


def test_parse_ncu_launches_keeps_every_launch_in_order():
    got = ncu.parse_ncu_launches(NCU_SAMPLE)
    assert [(launch["id"], launch["kernel"]) for launch in got] == [
        (0, "transpose_tile32"), (1, "transpose_tile33"), (2, "transpose_tile33"), (3, "copy_tile")]
    assert got[0] == {"kernel": "transpose_tile32", "id": 0, SHARED_LD: 16515072.0,
                      "smsp__thread_inst_executed_per_inst_executed.ratio": 31.52}
    assert got[2][SHARED_LD] == 7.0  # the second launch of a kernel, which parse_ncu_csv drops
    assert ncu.parse_ncu_launches("==PROF== nothing profiled\n") == []


def test_shared_metrics_are_well_formed_counter_names():
    for metric in ncu.SHARED_METRICS:
        base, _, rollup = metric.partition(".")
        assert "__" in base and rollup == "sum", metric
    assert len(set(ncu.SHARED_METRICS)) == len(ncu.SHARED_METRICS)


# --- a stand-in ncu: a script that answers like Nsight Compute -----------------------------------

FAKE_NCU = '''#!{python}
import json, subprocess, sys
args = sys.argv[1:]
if args == ["--query-metrics"]:
    print("Device NVIDIA H100 80GB HBM3 (GH100)")
    print("-" * 60)
    print("Metric Name              Metric Type     Metric Unit      Metric Description")
    print("-" * 60)
    print("dram__bytes_read         Counter         byte             # of bytes read from DRAM")
    print("gpu__time_duration       Counter         nsecond          total duration in nanoseconds")
    sys.exit(0)
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler")
    print("Version 2025.3.1.0 (build 36398880) (public-release)")
    sys.exit(0)
with open({log!r}, "w") as f:
    json.dump(args, f)
opts = dict(zip(args[1:7:2], args[2:7:2]))  # after --csv: three options with values
metrics = opts["--metrics"].split(",")
rest = args[7:]
while rest[0] in ("--kernel-name", "--profile-from-start"):
    rest = rest[2:]
header = {header!r}
rows = [",".join('"' + h + '"' for h in header)]
for launch, kernel in (("0", "reduce3_sequential(const float *, float *, long long)"), ("1", "copy_vec4")):
    for m in metrics:
        fields = (launch, "1", "python3", "host", kernel, "1", "7", "(256, 1, 1)", "(4, 1, 1)", "0",
                  "9.0", "Command line profiler metrics", m, "", "1,024")
        rows.append(",".join('"' + x + '"' for x in fields))
with open(opts["--log-file"], "w") as f:
    f.write("\\n".join(rows) + "\\n")
sys.exit(subprocess.run(rest).returncode)
'''


@pytest.fixture()
def fake_ncu(tmp_path):
    path, log = tmp_path / "ncu", tmp_path / "argv.json"
    path.write_text(FAKE_NCU.format(python=sys.executable, log=str(log), header=NCU_HEADER))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path, log


def test_available_metrics_are_the_base_names_ncu_lists(fake_ncu):
    assert ncu.ncu_available_metrics(str(fake_ncu[0])) == {"dram__bytes_read", "gpu__time_duration"}


def test_profile_drops_what_this_gpu_lacks_and_reads_every_kernel(fake_ncu):
    path, log = fake_ncu
    wanted = ["dram__bytes_read.sum", SHARED_LD, "gpu__time_duration.sum"]
    out = ncu.profile([sys.executable, "-c", "pass"], wanted, kernel_regex="^(reduce|copy)", ncu=str(path))
    assert out["metrics"] == ["dram__bytes_read.sum", "gpu__time_duration.sum"]
    assert out["missing"] == [SHARED_LD]
    assert out["ncu_version"].startswith("Version 2025.3")
    assert out["kernels"] == {k: {"dram__bytes_read.sum": 1024.0, "gpu__time_duration.sum": 1024.0}
                              for k in ("reduce3_sequential", "copy_vec4")}
    argv = json.loads(log.read_text())
    assert argv[:4] == ["--csv", "--clock-control", "none", "--log-file"]
    assert argv[5:7] == ["--metrics", "dram__bytes_read.sum,gpu__time_duration.sum"]
    assert argv[7:11] == ["--kernel-name", "regex:^(reduce|copy)", sys.executable, "-c"]


def test_profile_of_a_region_passes_the_flag_and_lists_launches(fake_ncu):
    path, log = fake_ncu
    out = ncu.profile([sys.executable, "-c", "pass"], ["dram__bytes_read.sum"], ncu=str(path),
                      from_start=False)
    assert json.loads(log.read_text())[7:9] == ["--profile-from-start", "off"]
    assert [(launch["id"], launch["kernel"]) for launch in out["launches"]] == [
        (0, "reduce3_sequential"), (1, "copy_vec4")]
    assert out["launches"][1]["dram__bytes_read.sum"] == 1024.0


def test_a_failing_program_raises_with_the_tail_of_its_output(fake_ncu):
    with pytest.raises(RuntimeError, match=r"ncu failed \(exit 3\)"):
        ncu.profile([sys.executable, "-c", "raise SystemExit(3)"], ["dram__bytes_read.sum"],
                    ncu=str(fake_ncu[0]))


def test_no_ncu_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(ncu, "find_ncu", lambda: None)
    with pytest.raises(FileNotFoundError, match="Nsight Compute"):
        ncu.profile(["true"], ["dram__bytes_read.sum"])


def test_find_ncu_takes_the_one_on_path(fake_ncu, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_ncu[0].parent))
    assert ncu.find_ncu() == str(fake_ncu[0])


# --- the Source page: one row per SASS instruction --------------------------------------------

SOURCE_COLUMNS = ("Address", "Source", "Instructions Executed", "Address Space", "Access Operation",
                  "Access Size", "L1 Conflicts Shared N-Way", "L1 Wavefronts Shared Excessive",
                  "L1 Wavefronts Shared", "L1 Wavefronts Shared Ideal")


def source_block(kernel: str, rows: list[tuple]) -> str:
    lines = [f'"Kernel Name","{kernel}",', ",".join(f'"{c}"' for c in SOURCE_COLUMNS)]
    lines += [",".join(f'"{v}"' for v in row) for row in rows]
    return "\n".join(lines)


SOURCE_SAMPLE = "\n".join([
    source_block("transpose_tile32", [
        ("0x7f00", "      LDG.E.CONSTANT R4, desc[UR4][R2.64]", "532512", "Global", "Load", "32",
         "0", "0", "0", "0"),
        ("0x7f10", "@!P0  STS [R7], R4", "532512", "Shared", "Store", "32", "0", "0", "529287", "529287"),
        ("0x7f20", "      LDS R7, [R0]", "529029", "Shared", "Load", "32", "31", "16297374", "16826403",
         "529029"),
        ("0x7f30", "      EXIT", "1,056", "-", "-", "-", "0", "0", "0", "0")]),
    source_block("transpose_tile32", [("0x7f20", "      LDS R7, [R0]", "1", "Shared", "Load", "32",
                                       "1", "0", "1", "1")]),  # listed again: ignored
    source_block("transpose_tile33", [
        ("0x8f20", "      LDS R7, [R0]", "529029", "Shared", "Load", "32", "1", "0", "529029", "529029")]),
])


def test_parse_source_csv_keeps_each_kernel_s_first_listing():
    got = ncu.parse_source_csv(SOURCE_SAMPLE)
    assert list(got) == ["transpose_tile32", "transpose_tile33"]
    assert [r["Source"].split()[-1] for r in got["transpose_tile32"]] == ["desc[UR4][R2.64]", "R4", "[R0]",
                                                                           "EXIT"]


def test_shared_instructions_keeps_shared_rows_as_numbers():
    rows = ncu.shared_instructions(ncu.parse_source_csv(SOURCE_SAMPLE)["transpose_tile32"])
    assert [r["sass"] for r in rows] == ["@!P0 STS [R7], R4", "LDS R7, [R0]"]
    lds = rows[1]
    assert lds["operation"] == "Load" and lds["L1 Conflicts Shared N-Way"] == 31
    # the excess is the wavefronts beyond what the addresses require
    excess = lds["L1 Wavefronts Shared"] - lds["L1 Wavefronts Shared Ideal"]
    assert excess == lds["L1 Wavefronts Shared Excessive"]


def test_parse_raw_csv_reads_one_row_per_launch_after_the_units_line():
    text = "\n".join([
        "==PROF== Connected",
        '"ID","Kernel Name","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","gpu__time_duration.sum"',
        '"","","","nsecond"',
        '"0","transpose_tile33(const float *, float *, int, int)","639,272","20,512"',
        '"1","transpose_tile33(const float *, float *, int, int)","1","1"',
        '"2","copy_tile","n/a","9,000"',
    ])
    got = ncu.parse_raw_csv(text)
    assert got["transpose_tile33"] == {"l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": 639272.0,
                                       "gpu__time_duration.sum": 20512.0}
    assert got["copy_tile"]["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] is None


def test_parse_sections_csv_keeps_sections_units_and_the_first_launch():
    from infralens.tools.ncu import parse_sections_csv

    header = '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"'
    rows = ['"0","gemm(int)","GPU Speed Of Light Throughput","Duration","ns","1,373,728"',
            '"0","gemm(int)","GPU Speed Of Light Throughput","Compute (SM) Throughput","%","93.50"',
            '"0","gemm(int)","Occupancy","Achieved Occupancy","%","14.78"',
            '"1","gemm(int)","Occupancy","Achieved Occupancy","%","99"']
    out = parse_sections_csv("==PROF== noise\n" + "\n".join([header, *rows]))
    sol = out["gemm"]["GPU Speed Of Light Throughput"]
    assert sol["Duration"] == {"value": 1373728.0, "unit": "ns"}
    assert out["gemm"]["Occupancy"]["Achieved Occupancy"]["value"] == 14.78


def test_launch_bytes_and_lines():
    launch = {"kernel": "k", "dram__bytes_read.sum": 2e6, "dram__bytes_write.sum": 1e6,
              "lts__t_sectors_srcunit_tex_op_write.sum": 62500.0, "gpu__time_duration.sum": 1500.0}
    assert ncu.launch_bytes(launch) == {"read": 2e6, "write": 1e6, "stored": 2e6, "seconds": 1.5e-6}
    line = ncu.format_launches([launch])
    assert "read     2.0 MB" in line and "stored     2.0 MB" in line and "1.5 µs" in line
    totals = ncu.launch_totals([launch, launch])
    assert totals == {"read": 4e6, "write": 2e6, "stored": 4e6, "seconds": 3e-6, "kernels": 2}



def test_profile_variants_calls_the_driver_with_each_variant_and_the_args(fake_ncu, tmp_path, monkeypatch):
    path, log = fake_ncu
    calls = tmp_path / "calls.jsonl"
    (tmp_path / "drv.py").write_text(
        "import json\n"
        "def drive(variant, *args):\n"
        f"    with open({str(calls)!r}, 'a') as f:\n"
        "        f.write(json.dumps([variant, *args]) + '\\n')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    out = ncu.profile_variants("drv:drive", ["eager", "fused"], (3, {"k": 1}), ncu=str(path))
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["eager", 3, {"k": 1}], ["fused", 3, {"k": 1}]]
    assert list(out["variants"]) == ["eager", "fused"]
    assert [launch["kernel"] for launch in out["variants"]["fused"]] == ["reduce3_sequential", "copy_vec4"]
    assert json.loads(log.read_text())[7:9] == ["--profile-from-start", "off"]


def test_warm_then_region_calls_once_outside_and_once_inside(monkeypatch):
    import contextlib

    events = []

    @contextlib.contextmanager
    def fake_region():
        events.append("in")
        yield
        events.append("out")

    monkeypatch.setattr(ncu, "region", fake_region)
    ncu.warm_then_region(lambda: events.append("call"))
    assert events == ["call", "in", "call", "out"]
