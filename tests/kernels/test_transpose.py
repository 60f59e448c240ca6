"""The transposes' Python side: bad inputs are refused before anything reaches CUDA."""

import pytest

torch = pytest.importorskip("torch")

from infralens.kernels import library  # noqa: E402
from infralens.kernels.transpose import (  # noqa: E402
    BLOCK_SHAPE_KERNELS,
    NCU_TRANSPOSE_METRICS,
    TRANSPOSE_KERNELS,
    TransposeKernels,
    check_transpose_input,
)
from infralens.tools import ncu, nvcc  # noqa: E402

needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")


@pytest.mark.parametrize("bad, error, message", [
    (torch.ones(4), ValueError, "2-D"),
    (torch.ones(4, 4, dtype=torch.float16), TypeError, "float32"),
    (torch.ones(0, 4), ValueError, "empty"),
    (torch.ones(4, 6).t(), ValueError, "contiguous"),
    (torch.ones(3, 5), ValueError, "CUDA device"),
])
def test_transpose_input_rules(bad, error, message):
    with pytest.raises(error, match=message):
        check_transpose_input(bad)


@needs_nvcc
def test_bound_launchers_validate_before_launching():
    transpose = TransposeKernels()
    with pytest.raises(ValueError, match="unknown kernel"):
        transpose.bind("transpose_magic", torch.ones(4, 4), torch.ones(4, 4))
    with pytest.raises(ValueError, match="CUDA device"):
        transpose.transpose(torch.ones(33, 31), "transpose_tile33")


@needs_nvcc
def test_kernel_list_matches_the_source():
    # in order: the launcher takes a kernel by its number in the file
    assert list(TRANSPOSE_KERNELS + BLOCK_SHAPE_KERNELS) == library.kernel_order("transpose")


@needs_nvcc
def test_block_shapes_change_one_factor_each():
    # The padded tile four ways (Lab 05): the same shared tile per 32x32 of the matrix, and the
    # loads each thread issues before its barrier and the block size varied apart. Threads per
    # block come from the launcher table, loads from the source's loop bounds.
    source = library.source_path("transpose").read_text()
    res = {r.kernel: r for r in library.build("transpose").resources_for("sm_90")}
    padded = res["transpose_tile33"].shared_bytes
    assert res["transpose_tile33_x16"].shared_bytes == res["transpose_tile33_rows"].shared_bytes == padded
    assert res["transpose_tile33_tall"].shared_bytes == 4 * padded  # four 32x32 tiles, one block
    assert "{transpose_tile33_x16, kRows16, kTile}" in source
    assert "{transpose_tile33_tall, kTile, kTallRows}" in source
    assert "constexpr int kTallRows = 4 * kTile;" in source


@needs_nvcc
def test_block_shape_kernels_validate_before_launching():
    transpose = TransposeKernels()
    for kernel in BLOCK_SHAPE_KERNELS:
        with pytest.raises(ValueError, match="CUDA device"):
            transpose.transpose(torch.ones(33, 31), kernel)


needs_cuda = pytest.mark.skipif(not torch.cuda.is_available() or nvcc.find_nvcc() is None,
                                reason="needs a CUDA GPU and nvcc")


@needs_cuda
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (31, 33), (127, 129), (129, 127), (1000, 1537),
                                   (4097, 65), (65, 4097)])
def test_every_kernel_transposes_exactly_into_a_guarded_output(shape):
    # A transpose copies values: bitwise equality with x.t(); NaN-poisoned output (an unwritten
    # element fails) followed by a guard of canaries (a stray write fails). Tall tiles of 128
    # rows meet shapes that are not multiples of 128.
    kernels = TransposeKernels()
    rows, cols = shape
    x = torch.randn(rows, cols, generator=torch.Generator(device="cuda").manual_seed(rows), device="cuda")
    for kernel in TRANSPOSE_KERNELS + BLOCK_SHAPE_KERNELS:
        buf = torch.full((rows * cols + 64,), float("nan"), device="cuda")
        buf[rows * cols:] = 12345.0
        out = buf[:rows * cols].view((rows, cols) if kernel == "copy_tile" else (cols, rows))
        kernels.transpose(x, kernel, out=out)
        torch.cuda.synchronize()
        assert torch.equal(out, x if kernel == "copy_tile" else x.t()), (kernel, shape)
        assert bool((buf[rows * cols:] == 12345.0).all()), (kernel, shape)


def test_huge_dimensions_are_refused_before_int_overflow():
    x = torch.empty(2**31, 1, device="meta", dtype=torch.float32)
    with pytest.raises(ValueError, match="index with int"):
        check_transpose_input(x)


def test_ncu_metrics_extend_the_shared_ones_without_repeats():
    assert NCU_TRANSPOSE_METRICS[:len(ncu.SHARED_METRICS)] == ncu.SHARED_METRICS
    assert len(set(NCU_TRANSPOSE_METRICS)) == len(NCU_TRANSPOSE_METRICS)
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum"} <= set(NCU_TRANSPOSE_METRICS)
