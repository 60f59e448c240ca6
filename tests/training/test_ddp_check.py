"""DDP's gradients equal one process's: ddp_check under torchrun with two CPU ranks (gloo).

The equivalence test computes its reference here, in one process, from the model and data
alone: rank 0's initial weights, the whole global batch, the mean loss, one backward, float64.
DDP's gradients must equal it to float64 rounding, with and without ``no_sync`` accumulation.
"""

from __future__ import annotations

import pytest
import torch

from infralens.models.gpt import GPT
from infralens.training import ddp_check
from infralens.training.launch import torchrun

pytestmark = pytest.mark.skipif(not torch.distributed.is_gloo_available(), reason="needs gloo")


@pytest.fixture(scope="module")
def check(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("ddp") / "grads.pt"
    done = torchrun("infralens.training.ddp_check", ["--out", str(out)], nproc=2, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out)


def reference(indices: list[int]) -> torch.Tensor:
    """One process: rank 0's weights (seed 0), all windows at once, mean loss, float64."""
    torch.manual_seed(ddp_check.SEED)
    model = GPT(ddp_check.MODEL).to(torch.float64)
    data = ddp_check.dataset()
    x = torch.stack([data[i][0] for i in indices])
    y = torch.stack([data[i][1] for i in indices])
    model(x, y)[1].backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def test_each_rank_read_its_own_half_of_the_global_batch(check):
    ranks = check["indices"]
    assert len(ranks) == 2 and not set(ranks[0]) & set(ranks[1])
    assert sorted(ranks[0] + ranks[1]) == list(range(2 * ddp_check.BATCH))


def test_ddp_gradients_equal_single_process_gradients(check):
    ref = reference(sorted(i for rank in check["indices"] for i in rank))
    assert check["plain"].dtype == torch.float64
    torch.testing.assert_close(check["plain"], ref, rtol=1e-12, atol=1e-14)
    assert ref.abs().max() > 1e-3  # the comparison is not between two vectors of zeros


def test_no_sync_accumulation_matches(check):
    ref = reference(sorted(i for rank in check["indices"] for i in rank))
    torch.testing.assert_close(check["accum"], ref, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(check["accum"], check["plain"], rtol=1e-12, atol=1e-14)
    assert check["spread_after_no_sync"] > 1e-3  # no_sync really skipped the all-reduce ...
    assert check["spread_after_sync"] == 0.0  # ... and the synchronized backward made them equal


def test_the_page_reference_agrees(check):
    indices = sorted(i for rank in check["indices"] for i in rank)
    torch.testing.assert_close(ddp_check.single_process_gradients(indices), reference(indices),
                               rtol=0, atol=0)

