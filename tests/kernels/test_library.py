"""The book's CUDA kernels as libraries: built by name, loaded, launched with every code checked
(no GPU needed: the launchers refuse bad arguments before touching one)."""

import ctypes
import os
import re

import pytest
import torch

from infralens.kernels import library
from infralens.kernels.bank_conflicts import TILE_32x32, TILE_32x33, tile_column_access
from infralens.kernels.reduce import REDUCE_RUNGS, ReduceKernels
from infralens.kernels.transpose import BLOCK_SHAPE_KERNELS, TRANSPOSE_KERNELS
from infralens.tools import nvcc
from infralens.tools.glue import record


def test_reduce_header_shows_the_flags_build_uses():
    # The build line in reduce.cu's header comment is documentation: it must not drift from
    # the flags build() passes (every flag, every -gencode, the PTX for sm_90 included).
    header = " ".join(line.lstrip("/ ") for line in library.source_path("reduce").read_text().splitlines()
                      if line.startswith("//"))
    for flag in nvcc.NVCC_FLAGS:
        assert flag in header.split(), flag
    for flag in nvcc.gencode_flags():
        assert flag.replace("-gencode=", "-gencode ") in header, flag


def test_no_nvcc_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("INFRALENS_NVCC", "none")
    assert nvcc.find_nvcc() is None
    with pytest.raises(nvcc.NvccNotFound, match="nvcc was not found"):
        library.build("reduce")
    with pytest.raises(ValueError, match="unknown kernel source"):
        library.source_path("scan")


# --- with nvcc: every kernel compiles for both architectures --------------------------------------

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("INFRALENS_CACHE", str(tmp_path_factory.mktemp("cuda-cache")))
    try:
        yield {name: library.build(name) for name in library.SOURCES}
    finally:
        mp.undo()


@needs_nvcc
@pytest.mark.parametrize("name", sorted(library.SOURCES))
def test_every_kernel_compiles_for_sm90_and_sm80_without_spills(builds, name):
    result = builds[name]
    assert result.library.is_file() and not result.cached
    kernels = library.kernel_order(name)
    for arch in nvcc.ARCHS:
        report = result.resources_for(arch)
        assert [r.kernel for r in report] == kernels, arch
        for r in report:
            assert 0 < r.registers <= 255
            assert r.spill_store_bytes == r.spill_load_bytes == r.stack_bytes == 0, r


@needs_nvcc
def test_compiler_agrees_with_the_tile_layouts(builds):
    smem = {r.kernel: r.shared_bytes for r in builds["transpose"].resources_for("sm_90")}
    assert smem["transpose_tile32"] == smem["transpose_swizzle"] == TILE_32x32.bytes
    assert smem["transpose_tile33"] == smem["transpose_tile33_rows"] == TILE_32x33.bytes
    assert smem["transpose_naive"] == smem["copy_tile"] == 0
    reduce_smem = {r.kernel: r.shared_bytes for r in builds["reduce"].resources_for("sm_90")}
    assert reduce_smem["reduce3_sequential"] == 256 * 4  # one float per thread of the block


@needs_nvcc
def test_second_build_comes_from_the_cache(builds, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(builds["reduce"].library.parents[2]))
    again = library.build("reduce")
    assert again.cached and again.library == builds["reduce"].library
    assert again.resources == builds["reduce"].resources


@needs_nvcc
def test_c_launchers_reject_bad_arguments_before_touching_a_gpu(builds):
    lib = ctypes.CDLL(str(builds["reduce"].library))
    invalid_value = 1  # cudaErrorInvalidValue
    for rung in REDUCE_RUNGS[:-1]:
        fn = getattr(lib, f"launch_{rung}")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_void_p]
        assert fn(None, None, 10, None) == invalid_value  # null pointers
        assert fn(256, 256, 0, None) == invalid_value      # nothing to sum
    six = lib.launch_reduce6_grid_stride
    six.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p]
    assert six(256, 256, None, 1056, 10, None) == invalid_value  # no workspace
    assert six(260, 256, 512, 1056, 10, None) == invalid_value   # not 16-byte aligned
    sums = lib.launch_reduce_block_sums
    sums.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                     ctypes.c_longlong, ctypes.c_void_p]
    assert sums(0, 256, 512, 10, 10, None) == invalid_value  # rung 0 has no tree
    assert sums(6, 256, 512, 10, 10, None) == invalid_value  # nor has rung 6
    assert sums(3, 256, None, 10, 10, None) == invalid_value  # no partials
    blocks = lib.reduce_tree_blocks
    blocks.argtypes, blocks.restype = [ctypes.c_int, ctypes.c_longlong], ctypes.c_longlong
    assert [blocks(r, 1000) for r in range(7)] == [-1, 4, 4, 4, 2, 2, -1]  # 256 or 512 per block
    variant = lib.launch_reduce_variant
    variant.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p,
                                                                 ctypes.c_longlong, ctypes.c_void_p]
    for v in range(2):
        assert variant(v, None, 256, 512, 10, 1024, 10, None) == invalid_value  # null input
        assert variant(v, 256, 256, 512, 10, 1024, 0, None) == invalid_value   # nothing to sum
        assert variant(v, 260, 256, 512, 10, 1024, 10, None) == invalid_value  # not 16-byte aligned
    grid = lib.reduce_variant_grid_size
    grid.argtypes = [ctypes.c_int, ctypes.c_void_p]
    assert grid(2, 256) == invalid_value and grid(0, None) == invalid_value  # no such variant; no out
    tlib = ctypes.CDLL(str(builds["transpose"].library))
    kernels = TRANSPOSE_KERNELS + BLOCK_SHAPE_KERNELS
    assert tlib.transpose_num_kernels() == len(kernels)
    fn = tlib.launch_transpose
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
                   ctypes.c_void_p]
    for k in range(len(kernels)):
        assert fn(k, 256, 256, 0, 5, None) == invalid_value
        assert fn(k, None, 256, 5, 5, None) == invalid_value
    assert fn(len(kernels), 256, 256, 5, 5, None) == invalid_value  # no such kernel
    assert fn(-1, 256, 256, 5, 5, None) == invalid_value


@needs_nvcc
def test_error_codes_become_exceptions_with_cuda_names(builds):
    kernels = ReduceKernels(builds["reduce"])
    with pytest.raises(library.CudaError, match="cudaErrorInvalidValue"):
        kernels.check("launch_reduce0_atomic", 1)
    kernels.check("launch_reduce0_atomic", 0)  # success is silent


@needs_nvcc
def test_ptx_has_an_entry_per_kernel_for_the_asked_architecture(monkeypatch, tmp_path):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path))
    text = library.ptx("transpose", "sm_80")
    assert ".target sm_80" in text
    entries = re.findall(r"\.entry (\w+)\(", text)
    assert sorted(entries) == sorted(library.kernel_order("transpose"))


# --- the Python side of a launch ------------------------------------------------------------------

def test_sources_are_the_cu_files_next_to_the_module():
    for name, file in library.SOURCES.items():
        path = library.source_path(name)
        assert path.name == file and path.parent == library.KERNEL_DIR and path.is_file()
        # every __global__ function, in the order the file defines them
        text = path.read_text(encoding="utf-8")
        positions = [re.search(rf"__global__ void (__launch_bounds__\([^)]*\)\s*)?{k}\(", text).start()
                     for k in library.kernel_order(name)]
        assert positions == sorted(positions) and len(positions) == text.count("__global__")


@pytest.mark.parametrize("out, numel, error, message", [
    ("not a tensor", 1, TypeError, "contiguous float32"),
    (torch.zeros(4, dtype=torch.float64), 1, TypeError, "contiguous float32"),
    (torch.zeros(4, 2).t(), 1, TypeError, "contiguous float32"),
    (torch.zeros(3), 4, ValueError, "has 3 elements, needs at least 4"),
    (torch.zeros(4, device="meta"), 4, ValueError, "is on meta"),
])
def test_check_output(out, numel, error, message):
    with pytest.raises(error, match=message):
        library.check_output(out, torch.zeros(8), numel, "out")
    library.check_output(torch.zeros(4), torch.zeros(8), 4, "out")  # a good one passes


def test_launch_calls_once_with_its_arguments_and_checks_the_code():
    calls, checked = [], []

    class Checker:
        def check(self, call, code):
            checked.append((call, code))

    keep = (torch.zeros(2),)
    launch = library.Launch(keep, Checker(), "launch_demo", lambda *a: calls.append(a) or 7, (1, 2, 3))
    launch()
    launch()
    assert calls == [(1, 2, 3)] * 2 and checked == [("launch_demo", 7)] * 2
    assert launch.keep is keep  # the tensors outlive every launch


def test_cuda_error_message_names_the_call_and_the_code():
    err = library.CudaError("launch_x", 700, "cudaErrorIllegalAddress", "an illegal memory access")
    assert str(err) == "launch_x: cudaErrorIllegalAddress (700): an illegal memory access"
    assert (err.call, err.code, err.name) == ("launch_x", 700, "cudaErrorIllegalAddress")


def test_run_ncu_profiles_the_driver_of_this_package(monkeypatch):
    seen = {}

    def profile(command, metrics, *, kernel_regex=None, env=None, timeout=300.0):
        seen.update(command=command, metrics=list(metrics), regex=kernel_regex, env=env)
        return {"kernels": {}}

    monkeypatch.setattr(library.ncu, "profile", profile)
    out = library.run_ncu("reduce", ["dram__bytes_read.sum"], ["--n", "1000"])
    assert seen["command"][1:] == ["-m", "infralens.kernels", "ncu-driver", "reduce", "--n", "1000"]
    assert seen["metrics"] == ["dram__bytes_read.sum"] and re.match(seen["regex"], "reduce3_sequential")
    src = str(library.KERNEL_DIR.parents[1])
    assert seen["env"]["PYTHONPATH"].split(os.pathsep)[0] == src  # the child imports this checkout
    assert out["driver"] == ["reduce", "--n", "1000"]


# --- reading Nsight Compute's counters ------------------------------------------------------------

def test_ncu_ratio_divides_the_named_counters():
    counters = {"wavefronts": 96.0, "requests": 32.0, "none": None, "zero": 0.0}
    assert library.ncu_ratio(counters, "wavefronts", "requests") == 3.0
    assert library.ncu_ratio(counters, "requests", "wavefronts") == 1 / 3
    assert library.ncu_ratio(counters, "zero", "requests") == 0.0  # a zero numerator is a ratio
    # No ratio, rather than an exception, where a counter is missing, empty or a zero divisor.
    for numerator, denominator in (("missing", "requests"), ("wavefronts", "missing"),
                                   ("none", "requests"), ("wavefronts", "none"), ("wavefronts", "zero")):
        assert library.ncu_ratio(counters, numerator, denominator) is None, (numerator, denominator)


def test_shared_bank_conflicts_adds_loads_and_stores():
    ld = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
    st = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
    assert library.shared_bank_conflicts({ld: 7.0, st: 5.0, "smsp__inst_executed.sum": 1e9}) == 12.0
    assert library.shared_bank_conflicts({ld: 7.0}) == 7.0  # a missing counter counts as zero
    assert library.shared_bank_conflicts({ld: None, st: 5.0}) == 5.0
    assert library.shared_bank_conflicts({}) == 0


def test_counter_helpers_on_the_h100_transpose_counters():
    # Lab 05's Nsight Compute run on an H100. For 4-byte shared accesses every conflict is one extra
    # wavefront, so the conflicts are the wavefronts less the instructions, loads and stores alike.
    kernels = record("lab05-transpose-counters").results["kernels"]
    wf = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{}.sum"
    inst = "smsp__sass_inst_executed_op_shared_{}.sum"
    for name, counters in kernels.items():
        extra = sum(counters[wf.format(op)] - counters[inst.format(op)] for op in ("ld", "st"))
        assert library.shared_bank_conflicts(counters) == extra, name
    # The unpadded tile's column reads: the bank model's 32-way conflict, within 1 %.
    degree = library.ncu_ratio(kernels["transpose_tile32"], wf.format("ld"), inst.format("ld"))
    assert degree == pytest.approx(tile_column_access(TILE_32x32, 0).degree, rel=0.01)
    assert tile_column_access(TILE_32x32, 0).degree == 32
    assert library.ncu_ratio(kernels["transpose_naive"], wf.format("ld"), inst.format("ld")) is None  # no LDS
