"""nvcc from Python: ptxas's report, PTX and SASS read back, and a cached build of a small .cu file."""

import os
import stat

import pytest

from infralens.tools import nvcc

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")

PTXAS_SAMPLE = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'reduce3_sequential' for 'sm_90'
ptxas info    : Function properties for reduce3_sequential
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 1 barriers, 1024 bytes smem
ptxas info    : Compile time = 2.722 ms
ptxas info    : Function properties for helper
    16 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
    96 bytes stack frame, 40 bytes spill stores, 44 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 376 bytes cmem[0]
"""


def test_parse_ptxas_entries_spills_and_optional_fields():
    first, second = nvcc.parse_ptxas(PTXAS_SAMPLE)
    assert first == nvcc.KernelResources("reduce3_sequential", "sm_90", 10, 1024, 1, 0, 0, 0, None)
    # a non-entry function's properties between entries are not attributed to any kernel
    assert second == nvcc.KernelResources("big", "sm_80", 255, 0, 0, 96, 40, 44, 376)
    assert nvcc.parse_ptxas("") == []


def test_gencode_flags():
    assert nvcc.gencode_flags(("sm_90", "sm_80")) == [
        "-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90,code=compute_90"]
    with pytest.raises(ValueError, match="sm_XY"):
        nvcc.gencode_flags(("hopper",))


def test_cache_dir_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path))
    assert nvcc.cache_dir() == tmp_path / "cuda"


SASS_SAMPLE = """
        Function : transpose_tile33_rows
        /*0080*/                   LDG.E.CONSTANT R4, desc[UR4][R2.64] ;
        /*0090*/                   LDG.E.CONSTANT R5, desc[UR4][R2.64+0x80] ;
        /*00a0*/                   STS [R7], R4 ;
        /*00b0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00c0*/              @P0 BRA 0x1f0 ;
        /*00d0*/                   LDS R9, [R8] ;
        /*00e0*/                   STG.E desc[UR4][R10.64], R9 ;
        Function : transpose_tile33
        /*0080*/                   LDG.E.CONSTANT R4, desc[UR4][R2.64] ;
"""


def test_parse_sass_ops():
    assert nvcc.parse_sass_ops(SASS_SAMPLE, "transpose_tile33_rows") == [
        "LDG.E.CONSTANT", "LDG.E.CONSTANT", "STS", "BAR.SYNC.DEFER_BLOCKING", "BRA", "LDS", "STG.E"]
    assert nvcc.parse_sass_ops(SASS_SAMPLE, "transpose_tile33") == ["LDG.E.CONSTANT"]
    with pytest.raises(ValueError, match="no function"):
        nvcc.parse_sass_ops(SASS_SAMPLE, "copy_tile")


def test_find_nvcc_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("INFRALENS_NVCC", str(tmp_path / "my-nvcc"))
    assert nvcc.find_nvcc() == str(tmp_path / "my-nvcc")
    for off in ("", "none", " NONE "):
        monkeypatch.setenv("INFRALENS_NVCC", off)
        assert nvcc.find_nvcc() is None


def test_nvcc_version_reads_the_release_line(tmp_path):
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\n"
                    "echo 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
                    "echo 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
                    "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n"
                    "echo 'Build cuda_13.0.r13.0/compiler.36424714_0'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    assert nvcc.nvcc_version(str(fake)) == "release 13.0, V13.0.88"


SMALL_CU = """\
#include <cuda_runtime.h>

extern "C" {  // unmangled names, as the book's sources have them

__global__ void scale(float *x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

// a helper is not a kernel
__device__ float twice(float v) { return 2 * v; }

__global__ void block_sum(const float *x, float *out) {
    __shared__ float buf[128];
    buf[threadIdx.x] = twice(x[blockIdx.x * 128 + threadIdx.x]);
    __syncthreads();
    if (threadIdx.x == 0) {
        float s = 0;
        for (int i = 0; i < 128; ++i) s += buf[i];
        out[blockIdx.x] = s;
    }
}

int launch_scale(float *x, float a, int n) {
    scale<<<(n + 255) / 256, 256>>>(x, a, n);
    return (int)cudaGetLastError();
}

}  // extern "C"
"""


def test_kernel_order_is_the_global_functions_in_definition_order(tmp_path):
    source = tmp_path / "small.cu"
    source.write_text(SMALL_CU)
    assert nvcc.kernel_order(source) == ["scale", "block_sum"]
    bounded = tmp_path / "bounded.cu"
    bounded.write_text('extern "C" __global__ void __launch_bounds__(256, 8)\n'
                       "first(float* x) {}\n__global__ void second(float* x) {}\n")
    assert nvcc.kernel_order(bounded) == ["first", "second"]


PTX_SAMPLE = """\
.version 9.0
.target sm_90
.visible .entry scale(
\t.param .u64 scale_param_0
)
{
\tret;
}
.visible .entry block_sum(
\t.param .u64 block_sum_param_0
)
{
\tbar.sync 0;
\tret;
}
"""


def test_ptx_entry_cuts_one_kernel():
    body = nvcc.ptx_entry(PTX_SAMPLE, "block_sum")
    assert body.startswith(".entry block_sum(") and body.endswith("}") and "bar.sync" in body
    assert "bar.sync" not in nvcc.ptx_entry(PTX_SAMPLE, "scale")
    with pytest.raises(ValueError, match="no .entry copy"):
        nvcc.ptx_entry(PTX_SAMPLE, "copy")


def test_build_without_nvcc_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_NVCC", "none")
    with pytest.raises(nvcc.NvccNotFound, match="nvcc was not found"):
        nvcc.build(tmp_path / "small.cu")
    with pytest.raises(nvcc.NvccNotFound):
        nvcc.ptx(tmp_path / "small.cu")
    assert issubclass(nvcc.NvccNotFound, nvcc.BuildError)


@needs_nvcc
def test_build_reports_what_the_source_declares(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "small.cu"
    source.write_text(SMALL_CU)
    first = nvcc.build(source, ("sm_80",))
    assert not first.cached and first.library.name == "libsmall.so" and first.library.is_file()
    assert first.archs == ("sm_80",) and first.nvcc_version.startswith("release ")
    rows = {r.kernel: r for r in first.resources_for("sm_80")}
    assert list(rows) == ["scale", "block_sum"]  # source order, the helper is not an entry
    assert rows["block_sum"].shared_bytes == 128 * 4 and rows["scale"].shared_bytes == 0
    assert rows["block_sum"].barriers == 1 and rows["scale"].barriers == 0  # __syncthreads
    assert all(0 < r.registers <= 255 for r in rows.values())
    assert first.resources_for("sm_90") == []  # not built for it
    table = nvcc.resources_table(first, "sm_80")
    assert [row["kernel"] for row in table] == ["scale", "block_sum"] and "arch" not in table[0]
    again = nvcc.build(source, ("sm_80",))
    assert again.cached and again.library == first.library and again.resources == first.resources
    assert not nvcc.build(source, ("sm_80",), force=True).cached
    source.write_text(SMALL_CU + "\n// a change\n")
    assert nvcc.build(source, ("sm_80",)).library != first.library  # a new source, a new folder


@needs_nvcc
def test_a_compile_error_raises_build_error_with_nvcc_output(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "broken.cu"
    source.write_text("__global__ void broken(float *x) { x[0] = undeclared; }\n")
    with pytest.raises(nvcc.BuildError, match="nvcc failed on broken.cu") as info:
        nvcc.build(source, ("sm_80",))
    assert "undeclared" in str(info.value)
    leftovers = [p for p in (tmp_path / "cache" / "cuda").iterdir()]
    assert leftovers == []  # the temporary build folder is removed


@needs_nvcc
def test_ptx_is_generated_for_the_asked_architecture(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRALENS_CACHE", str(tmp_path / "cache"))
    source = tmp_path / "small.cu"
    source.write_text(SMALL_CU)
    text = nvcc.ptx(source, "sm_80")
    assert ".target sm_80" in text
    assert "bar.sync" in nvcc.ptx_entry(text, "block_sum") and "bar.sync" not in nvcc.ptx_entry(text, "scale")


def test_sass_ops_without_cuobjdump_is_none(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if os.path.isfile("/usr/local/cuda/bin/cuobjdump"):
        pytest.skip("this machine has cuobjdump in /usr/local/cuda")
    assert nvcc.sass_ops(tmp_path / "lib.so", "scale") is None
