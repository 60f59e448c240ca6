"""effective_bits: the published per-weight costs of common schemes, and bad input refused."""

from __future__ import annotations

import pytest

from infralens.quant import effective_bits


def test_published_costs():
    assert effective_bits(4, 32, scale_bits=8) == 4.25            # MXFP4: E8M0 per 32 (OCP MX)
    assert effective_bits(8, 32, scale_bits=8) == 8.25            # MXFP8
    assert effective_bits(4, 128) == 4.125                        # INT4, FP16 scale per 128
    assert effective_bits(4, 128, 16, 16) == 4.25                 # with an FP16 zero point
    assert effective_bits(8, 10**9) == pytest.approx(8)           # per-tensor: metadata vanishes


@pytest.mark.parametrize("args", [(0, 32), (4, 0), (4, 32, -1), (4, 32, 16, -8)])
def test_bad_input_is_refused(args):
    with pytest.raises(ValueError, match="effective_bits"):
        effective_bits(*args)
