"""ATen's softmax dispatch, written down: each branch of host_softmax at its edges, and, on a GPU,
against the kernel PyTorch's profiler sees."""

import pytest

from infralens.kernels.aten_softmax import (
    REG_PATH_MAX_PER_THREAD,
    WARP_PATH_MAX_BYTES,
    WARP_PATH_MAX_ELEMENTS,
    aten_softmax_path,
    profiled_softmax_kernels,
)


@pytest.mark.parametrize("n, elem, kernel", [
    (1, 4, "softmax_warp_forward"),
    (2048, 4, "softmax_warp_forward"),     # 8 KiB exactly: still the warp path
    (2048, 2, "softmax_warp_forward"),
    (1024, 8, "softmax_warp_forward"),     # fp64: 8 KiB
    (1025, 8, "cunn_SoftMaxForwardReg"),   # fp64 past 8 KiB: a block per row, 2 per thread
    (2049, 2, "cunn_SoftMaxForwardReg"),   # past 2,048 elements: a block per row
    (9216, 4, "cunn_SoftMaxForwardReg"),   # 9 per thread of 1,024
    (9220, 4, "cunn_SoftMaxForwardSmem"),  # 10 per thread, and the row fits in 48 KiB
    (9217, 4, "cunn_SoftMaxForward"),      # ... but not when N is not a multiple of the vector
    (12255, 4, "cunn_SoftMaxForward"),     # fits, but not a multiple of the 4-float vector
    (12252, 4, "cunn_SoftMaxForwardSmem"),
    (12256, 4, "cunn_SoftMaxForward"),     # (49,152 - 128) / 4 = 12,256 is not below itself
    (24504, 2, "cunn_SoftMaxForwardSmem"),
    (24512, 2, "cunn_SoftMaxForward"),
    (32768, 2, "cunn_SoftMaxForward"),
])
def test_each_branch_of_host_softmax_at_its_edges(n, elem, kernel):
    assert aten_softmax_path(n, elem).kernel == kernel


def test_the_thresholds_are_the_source_s():
    assert (WARP_PATH_MAX_ELEMENTS, WARP_PATH_MAX_BYTES, REG_PATH_MAX_PER_THREAD) == (2048, 8192, 9)


def test_warp_path_pads_to_a_power_of_two_over_one_warp():
    p = aten_softmax_path(384, 2)
    assert (p.threads_per_row, p.elements_per_thread, p.row_reads, p.shared_bytes) == (32, 16, 1, 0)
    assert aten_softmax_path(100, 4).elements_per_thread == 4  # 128 / 32
    assert aten_softmax_path(8, 4).threads_per_row == 8  # short rows: fewer lanes than a warp


def test_block_path_threads_reads_and_shared_memory():
    reg = aten_softmax_path(3072, 2)
    assert (reg.threads_per_row, reg.elements_per_thread, reg.row_reads) == (1024, 3, 1)
    assert reg.shared_bytes == 32 * 4  # one float per warp for the block reductions
    smem = aten_softmax_path(16384, 2)
    assert smem.row_reads == 1 and smem.shared_bytes == 16384 * 2 + 128  # the row, then the floats
    three = aten_softmax_path(32768, 4)
    assert three.row_reads == 3 and three.shared_bytes == 128
    # without 16-byte alignment the shared-memory copy is refused: three reads
    assert aten_softmax_path(16384, 2, aligned=False).kernel == "cunn_SoftMaxForward"
    # a GPU giving a block more shared memory by default keeps wider rows on chip
    assert aten_softmax_path(16384, 4, shared_per_block=96 * 1024).kernel == "cunn_SoftMaxForwardSmem"


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="n_cols >= 1"):
        aten_softmax_path(0, 4)
    with pytest.raises(ValueError, match="8-byte element"):
        aten_softmax_path(10, 3)


def test_profiling_needs_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA"):
        profiled_softmax_kernels([256], [torch.float32])


def test_the_installed_pytorch_launches_what_the_source_says():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    widths = [256, 384, 2048, 3072, 9216, 10240, 12288, 16384, 24576, 32768]
    rows = profiled_softmax_kernels(widths, [torch.float32, torch.bfloat16], rows=64)
    assert all(r["match"] for r in rows), [r for r in rows if not r["match"]]
