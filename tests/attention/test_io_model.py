"""The HBM-traffic closed forms against what the attention loops tally, and against hand counts."""

import pytest
import torch

from infralens.attention.flash_reference import flash_attention_forward, flash_attention_forward_paper
from infralens.attention.io_model import (
    IOCount,
    compulsory_hbm_elements,
    flash_hbm_elements,
    naive_hbm_elements,
    paper_block_sizes,
)
from infralens.attention.reference import naive_attention


def qkv(S, d=16, lead=(2, 3), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*lead, S, d, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("S", [1, 37, 64, 200])
def test_io_model_counts_what_the_loops_move(S, causal):
    d, lead = 16, (2, 3)
    heads = 6
    q, k, v = qkv(S, d, lead)
    io = IOCount()
    naive_attention(q, k, v, causal=causal, io=io)
    assert io.total == heads * naive_hbm_elements(S, d)
    io = IOCount()
    flash_attention_forward(q, k, v, causal=causal, block_m=32, block_n=16, io=io)
    assert io.total == heads * flash_hbm_elements(S, d, block_m=32, block_n=16, causal=causal)
    io = IOCount()
    flash_attention_forward_paper(q, k, v, causal=causal, block_r=16, block_c=32, io=io)
    assert io.total == heads * flash_hbm_elements(S, d, block_m=16, block_n=32, causal=causal,
                                                  order="fa1")


def test_io_model_shapes():
    # Naive: 4Sd + 4S^2. Tiled (FA-2 order): Q, O, lse once; K and V once per query block.
    assert naive_hbm_elements(1024, 64) == 4 * 1024 * 64 + 4 * 1024**2
    S, d, bm = 4096, 128, 128
    assert flash_hbm_elements(S, d, block_m=bm, block_n=64) == 2 * S * d + S + (S // bm) * 2 * S * d
    # Causal visits about half of the key blocks.
    full = flash_hbm_elements(S, d, block_m=bm, block_n=bm)
    half = flash_hbm_elements(S, d, block_m=bm, block_n=bm, causal=True)
    assert 0.5 < half / full < 0.55
    # The paper's Theta(S^2 d^2 / M): quadrupling M quarters the dominant term (FA-1 order).
    S, d = 1 << 16, 64
    small, big = (flash_hbm_elements(S, d, block_m=min(bc, d), block_n=bc, order="fa1")
                  for bc in (256, 1024))
    assert small / big == pytest.approx(4, rel=0.05)
    with pytest.raises(ValueError):
        flash_hbm_elements(64, 16, block_m=16, block_n=16, order="fa3")


def test_paper_block_sizes():
    # M = 100 KiB of 2-byte elements, d = 64: B_c = ceil(51200 / 256) = 200, B_r = min(200, 64).
    assert paper_block_sizes(100 * 1024, 64) == (64, 200)
    assert paper_block_sizes(1024, 128, elem_bytes=4) == (1, 1)


def test_io_count_tallies_elements_not_bytes():
    io = IOCount()
    io.read(torch.zeros(3, 4, dtype=torch.float64), torch.zeros(5, dtype=torch.float16))
    io.write(torch.zeros(2, 2))
    assert (io.reads, io.writes, io.total) == (17, 4, 21)


def test_one_block_holding_everything_moves_each_tensor_once():
    # With one query block and one key block, Q, K, V and O move once and lse is written once:
    # 4 S d + S, whatever S, against the naive 4 S d + 4 S^2.
    for S, d in ((1, 8), (37, 16), (64, 64)):
        assert flash_hbm_elements(S, d, block_m=S, block_n=S) == 4 * S * d + S
        assert naive_hbm_elements(S, d) - flash_hbm_elements(S, d, block_m=S, block_n=S) == 4 * S * S - S


def test_compulsory_traffic_is_q_k_v_read_and_o_written_once():
    S, d = 37, 16
    q, k, v = qkv(S, d, lead=(1, 1))
    io = IOCount()
    io.read(q, k, v)
    io.write(torch.empty_like(q))
    assert compulsory_hbm_elements(S, d) == io.total
    # With one block covering the whole sequence, the tiled loop moves only that, plus the lse.
    assert flash_hbm_elements(S, d, block_m=S, block_n=S) == compulsory_hbm_elements(S, d) + S
