"""The transposes' Python side: bad inputs are refused before anything reaches CUDA."""

import pytest

torch = pytest.importorskip("torch")

from infralens.kernels import library  # noqa: E402
from infralens.kernels.transpose import (  # noqa: E402
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
    assert list(TRANSPOSE_KERNELS) == library.kernel_order("transpose")


def test_huge_dimensions_are_refused_before_int_overflow():
    x = torch.empty(2**31, 1, device="meta", dtype=torch.float32)
    with pytest.raises(ValueError, match="index with int"):
        check_transpose_input(x)


def test_ncu_metrics_extend_the_shared_ones_without_repeats():
    assert NCU_TRANSPOSE_METRICS[:len(ncu.SHARED_METRICS)] == ncu.SHARED_METRICS
    assert len(set(NCU_TRANSPOSE_METRICS)) == len(NCU_TRANSPOSE_METRICS)
    assert {"dram__bytes_read.sum", "dram__bytes_write.sum"} <= set(NCU_TRANSPOSE_METRICS)
