"""The layer traffic model: each count against the operators eager PyTorch runs, and the matmul
work against the book's Llama-style block."""

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from infralens.models import load_config
from infralens.transformer import traffic
from infralens.transformer.block import DecoderBlock
from tests.tensors import aten_traffic

TINY = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 8,
        "num_key_value_heads": 2, "num_hidden_layers": 1, "intermediate_size": 176,
        "vocab_size": 100}


def test_swiglu_bytes_are_the_operators_eager_runs():
    T, h, f = 5, 16, 24
    y, wg, wu = torch.randn(T, h).bfloat16(), torch.randn(f, h).bfloat16(), torch.randn(f, h).bfloat16()
    rows = aten_traffic(lambda: F.silu(y @ wg.t()) * (y @ wu.t()))
    writes = {op: wr for op, _, wr in rows}
    outputs_of_mm = sum(wr for op, _, wr in rows if op == "mm")
    elementwise = sum(rd + wr for op, rd, wr in rows if op != "mm")
    assert writes["silu"] == writes["mul"] == T * f * 2
    assert traffic.swiglu_bytes(T, f, 2)["unfused"] == outputs_of_mm + elementwise
    assert traffic.swiglu_bytes(T, f, 2)["fused"] == T * f * 2


def test_residual_add_counts_the_matmul_output_and_the_add():
    T, h = 3, TINY["hidden_size"]
    o, wo, x = torch.randn(T, 32), torch.randn(h, 32), torch.randn(T, h)
    rows = aten_traffic(lambda: x + o @ wo.t())
    add_row = next(r for r in traffic.layer_traffic(TINY, T, 4) if r["op"].startswith("residual"))
    assert add_row["unfused"] == rows[0][2] + rows[1][1] + rows[1][2]  # mm write; add read + write
    assert add_row["fused"] == 2 * T * h * 4


def test_layer_matmul_flops_match_the_block():
    block = DecoderBlock(load_config(TINY))
    T = 7
    linears = [m for m in block.modules() if isinstance(m, torch.nn.Linear)]
    with FlopCounterMode(display=False) as counter:
        for lin in linears:  # each projection on an input of its width
            lin(torch.randn(T, lin.in_features))
    assert traffic.layer_matmul_flops(TINY, T) == counter.get_total_flops()
