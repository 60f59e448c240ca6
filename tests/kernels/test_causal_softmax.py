"""Causal softmax: the fused kernel against float64 (interpreted), hidden keys exactly zero, the
byte model against the operators eager PyTorch runs and a direct count of visible keys."""

import os

os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is first imported

import pytest  # noqa: E402

pytest.importorskip("triton")

import torch  # noqa: E402

from infralens.attention.masks import causal_mask  # noqa: E402
from infralens.kernels import causal_softmax as cs  # noqa: E402
from tests.tensors import aten_traffic  # noqa: E402


def test_kernel_matches_float64_and_hides_the_future():
    for row in cs.causal_softmax_errors():
        assert row["hidden_nonzero"] == 0, row
        limit = 1e-6 if row["dtype"] == "float32" else 2.0**-8  # one bf16 unit below 1
        assert row["fused"] <= limit, row


def test_visible_keys_counts_the_mask():
    for n_q, n_k in ((1, 1), (1, 9), (5, 5), (7, 20)):
        assert cs.visible_keys(n_q, n_k) == int(causal_mask(n_q, n_k).sum())
    with pytest.raises(ValueError):
        cs.visible_keys(5, 4)


def test_eager_bytes_match_the_operators_it_runs():
    bh, n_q, n_k = 3, 5, 8
    x = torch.randn(bh, n_q, n_k)
    rows = {op: (rd, wr) for op, rd, wr in aten_traffic(cs.causal_softmax_eager, x)
            if op in ("le", "where", "_softmax")}
    scores, mask = bh * n_q * n_k * 4, n_q * n_k
    assert rows["le"][1] == mask
    assert rows["where"] == (scores + mask + 4, scores)  # 4: the -inf fill, a 0-d tensor
    assert rows["_softmax"] == (scores, scores)
    model = cs.causal_softmax_bytes(bh * n_q, n_q, n_k, 4)
    # the model reads the broadcast mask once per block of queries, where the operator reads it once
    reads_per_block = (bh - 1) * mask
    assert model["eager"] == (rows["le"][1] + sum(rd + wr for rd, wr in (rows["where"], rows["_softmax"]))
                              - 4 + reads_per_block)
    assert model["fused"] == bh * cs.visible_keys(n_q, n_k) * 4 + scores


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="n_q <= n_k"):
        cs.causal_softmax(torch.randn(2, 6, 4))
    with pytest.raises(ValueError, match="contiguous"):
        cs.causal_softmax(torch.randn(2, 8, 4).transpose(1, 2))
    with pytest.raises(ValueError, match="power of two"):
        cs.causal_softmax(torch.randn(2, 4, 8), block_n=24)
