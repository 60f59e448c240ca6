"""The profiling targets: their analytic counts, and one-line refusals."""

import pytest
import torch

from infralens.profiling.targets import ADD_ELEMENTS, MATMUL_N, flops_and_min_bytes, main


def test_counts():
    assert flops_and_min_bytes("add") == (ADD_ELEMENTS, 6 * ADD_ELEMENTS)
    f, b = flops_and_min_bytes("matmul")
    assert f == 2 * MATMUL_N**3 and b == 6 * MATMUL_N**2
    with pytest.raises(ValueError):
        flops_and_min_bytes("conv")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without a GPU")
def test_without_gpu_is_one_line(capsys):
    assert main(["add"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["conv"]) == 2
