"""The tensor-parallel block in one process: with one rank its shards are the whole block, and its
operators are identities when there is nothing to reduce."""

import pytest
import torch
import torch.distributed as dist

from infralens.models.gpt import Block, GPTConfig
from infralens.parallel.tensor import TRAFFIC, TensorParallelBlock


@pytest.fixture
def one_rank(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_world_of_one_is_the_block(one_rank):
    torch.manual_seed(0)
    cfg = GPTConfig(d_model=32, n_heads=4, n_positions=8)
    ref = Block(cfg).double()
    x = torch.randn(2, 8, 32, dtype=torch.float64)
    TRAFFIC.clear()
    tp = TensorParallelBlock(ref, 0, 1)
    torch.testing.assert_close(tp(x), ref(x), rtol=0, atol=1e-13)
    assert [t[0] for t in TRAFFIC] == ["forward", "forward"]
    assert tp.qkv_w.shape == ref.attn.qkv.weight.shape


def test_shards_are_slices_of_the_block():
    torch.manual_seed(0)
    cfg = GPTConfig(d_model=32, n_heads=4, n_positions=8)
    ref = Block(cfg)
    shards = [TensorParallelBlock(ref, r, 2) for r in range(2)]
    # the MLP's two halves, put back together, are the original matrices
    torch.testing.assert_close(torch.cat([s.fc_w for s in shards]), ref.mlp.fc.weight)
    torch.testing.assert_close(torch.cat([s.out_w for s in shards], dim=1), ref.mlp.proj.weight)
    assert shards[0].heads == 2
    with pytest.raises(ValueError):
        TensorParallelBlock(ref, 0, 3)
