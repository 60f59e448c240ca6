"""The GPU measurement functions, run small on the CPU with a fake timer."""

import json

import pytest
import torch

from infralens.attention.bench import decode_sweep, layer_matmul_times, prefill_sweep
from infralens.attention.flops import attention_flops
from infralens.attention.reference import naive_attention


def fake_timer(fn):
    fn()
    return 2.0  # ms


def test_prefill_sweep_format_and_accounting():
    out = prefill_sweep(8, 2, 16, [16, 33], tokens=66, backends=["flash", "cudnn", "math", "naive"],
                        timer=fake_timer, dtype=torch.float32, device="cpu", math_max_seq=16,
                        naive=naive_attention)
    json.dumps(out, allow_nan=False)
    runs = out["runs"]
    assert len(runs) == 2 * 4 * 2
    for r in runs:
        assert r["flops"] == attention_flops(r["batch"], 8, r["seq_len"], r["seq_len"], 16, r["causal"])
        assert ("ms" in r) + ("error" in r) + ("skipped" in r) == 1
        if "ms" in r:
            assert r["tflops"] == pytest.approx(r["flops"] / 2e-3 / 1e12)
    flash = [r for r in runs if r["backend"] == "flash"]
    assert all("ms" in r and r["gqa"] == "native" for r in flash)
    assert all("error" in r for r in runs if r["backend"] == "cudnn")  # no cuDNN on a CPU
    checked = [r for r in runs if "max_abs_err" in r]
    assert checked and all(r["seq_len"] == 16 and r["max_abs_err"] < 1e-5 for r in checked)
    assert [r["batch"] for r in runs if r["backend"] == "flash"] == [4, 4, 2, 2]
    assert all("skipped" in r for r in runs if r["backend"] in ("math", "naive") and r["seq_len"] == 33)


def test_decode_sweep():
    out = decode_sweep(8, 2, 16, contexts=[16, 40], batches=[1, 3], timer=fake_timer,
                       dtype=torch.float32, device="cpu", expanded_max_bytes=10_000)
    json.dumps(out, allow_nan=False)
    for r in out["runs"]:
        heads = 2 if r["variant"] == "gqa" else 8
        assert r["kv_bytes"] == 2 * r["batch"] * heads * r["context"] * 16 * 4
        if "ms" in r:
            assert r["gbps"] == pytest.approx(r["kv_bytes"] / 2e-3 / 1e9)
    assert any("skipped" in r for r in out["runs"])  # the large expanded caches


def test_layer_matmuls():
    out = layer_matmul_times(32, 32, 8, 88, 16, fake_timer, dtype=torch.float32, device="cpu")
    assert out["flops"] == 2 * 16 * (32 * 32 + 2 * 32 * 8 + 32 * 32 + 3 * 32 * 88)
    assert out["ms"] == 7 * 2.0
