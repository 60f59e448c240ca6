"""The reduction ladder's Python side: bad inputs are refused before anything reaches CUDA."""

import pytest

torch = pytest.importorskip("torch")

from infralens.kernels import library  # noqa: E402
from infralens.kernels.reduce import (  # noqa: E402
    NCU_REDUCE_METRICS,
    REDUCE_RUNGS,
    TREE_RUNGS,
    ReduceKernels,
    check_reduce_input,
)
from infralens.tools import ncu, nvcc  # noqa: E402


@pytest.mark.parametrize("bad, error, message", [
    ([1.0, 2.0], TypeError, "torch.Tensor"),
    (torch.ones(8, dtype=torch.float64), TypeError, "float32"),
    (torch.ones(0), ValueError, "empty"),
    (torch.ones(8, 2).t(), ValueError, "contiguous"),
    (torch.ones(8), ValueError, "CUDA device"),
])
def test_reduce_input_rules(bad, error, message):
    with pytest.raises(error, match=message):
        check_reduce_input(bad)


def test_vector_rungs_need_16_byte_alignment():
    x = torch.ones(9)
    with pytest.raises(ValueError, match="16-byte"):
        check_reduce_input(x[1:], vector=True)  # starts 4 bytes in
    with pytest.raises(ValueError, match="CUDA device"):  # aligned: only the device is wrong
        check_reduce_input(x[4:], vector=True)


needs_nvcc = pytest.mark.skipif(nvcc.find_nvcc() is None, reason="nvcc is not installed")


@needs_nvcc
def test_bound_launchers_validate_before_launching():
    reduce = ReduceKernels()
    with pytest.raises(ValueError, match="unknown rung"):
        reduce.bind("reduce7_magic", torch.ones(4))
    with pytest.raises(ValueError, match="CUDA device"):
        reduce.sum(torch.ones(1000), "reduce3_sequential")
    with pytest.raises(ValueError, match="not a tree rung"):
        reduce.bind_block_sums("reduce6_grid_stride", torch.ones(4), torch.ones(4))
    with pytest.raises(ValueError, match="CUDA device"):
        reduce.bind_block_sums("reduce3_sequential", torch.ones(1000), torch.ones(4))
    assert reduce.tree_blocks("reduce4_first_add", 513) == 2


@needs_nvcc
def test_kernel_list_matches_the_source():
    assert set(REDUCE_RUNGS) | {"reduce6_finalize", "copy_vec4"} == set(library.kernel_order("reduce"))


def test_rungs_in_ladder_order_and_the_tree_rungs_between():
    assert [int(r[len("reduce")]) for r in REDUCE_RUNGS] == list(range(7))
    assert TREE_RUNGS == REDUCE_RUNGS[1:6]


@needs_nvcc
def test_tree_blocks_are_the_ceiling_of_n_over_the_elements_per_block():
    # Rungs 1-3 sum one element per thread of a 256-thread block; rungs 4 and 5 add two on load.
    reduce = ReduceKernels()
    for n in (1, 255, 256, 257, 511, 512, 513, 10**6):
        for rung in TREE_RUNGS:
            per_block = 512 if rung in ("reduce4_first_add", "reduce5_warp_shuffle") else 256
            assert reduce.tree_blocks(rung, n) == -(-n // per_block), (rung, n)
    with pytest.raises(ValueError, match="not a tree rung"):
        reduce.tree_blocks("reduce0_atomic", 10)


def test_ncu_metrics_extend_the_shared_ones_without_repeats():
    assert NCU_REDUCE_METRICS[:len(ncu.SHARED_METRICS)] == ncu.SHARED_METRICS
    assert len(set(NCU_REDUCE_METRICS)) == len(NCU_REDUCE_METRICS)
    assert "dram__bytes_read.sum" in NCU_REDUCE_METRICS
