"""relative_output_error against its definition and its invariances."""

import torch

from infralens.quant.error import relative_output_error


def test_definition_and_scale_invariance():
    y_ref = torch.tensor([[1.0, -2.0], [3.0, 0.0]])
    y = y_ref + torch.tensor([[0.5, 0.0], [0.0, -0.5]])
    assert relative_output_error(y, y_ref) == (0.25 + 0.25) / (1 + 4 + 9)
    assert relative_output_error(10 * y, 10 * y_ref) == relative_output_error(y, y_ref)
    assert relative_output_error(y_ref, y_ref) == 0.0
