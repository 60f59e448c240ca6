"""The Nsight Compute driver for attention: summaries, the command it profiles, bad input."""

import sys

import pytest
import torch

from infralens.attention import dram


def test_summarize_sums_bytes_and_reads_rates_from_the_longest_kernel():
    kernels = {
        "fill": {"dram__bytes_read.sum": 10.0, "dram__bytes_write.sum": 5.0, "gpu__time_duration.sum": 2.0,
                 "lts__t_sector_hit_rate.pct": 10.0},
        "attn": {"dram__bytes_read.sum": 1000.0, "dram__bytes_write.sum": 300.0,
                 "gpu__time_duration.sum": 900.0, "lts__t_sector_hit_rate.pct": 98.0,
                 "smsp__inst_executed.sum": None},
    }
    s = dram.summarize(kernels)
    assert s["main"] == "attn" and s["kernels"] == 2
    assert s["totals"]["dram__bytes_read.sum"] == 1010.0 and s["totals"]["dram__bytes_write.sum"] == 305.0
    assert s["totals"]["smsp__inst_executed.sum"] == 0  # missing counts as zero
    assert s["main_counters"]["lts__t_sector_hit_rate.pct"] == 98.0
    with pytest.raises(ValueError):
        dram.summarize({})


def test_profile_attention_runs_the_driver_once_per_implementation(monkeypatch):
    calls = []

    def fake_profile(command, metrics, *, env, timeout):
        calls.append((command, env))
        impl = command[command.index("--impl") + 1]
        return {"ncu_version": "ncu test", "missing": ["x"], "metrics": list(metrics),
                "kernels": {f"{impl}_kernel": {"dram__bytes_read.sum": 1.0, "gpu__time_duration.sum": 3.0}}}

    monkeypatch.setattr(dram.ncu, "profile", fake_profile)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    out = dram.profile_attention(seq=256, heads=2, causal=True)
    assert list(out["runs"]) == list(dram.IMPLEMENTATIONS)
    assert out["runs"]["sdpa_cudnn"]["main"] == "sdpa_cudnn_kernel"
    assert out["shape"] == {"batch": 1, "heads": 2, "seq": 256, "head_dim": 128, "causal": True,
                            "dtype": "bfloat16"}
    command, env = calls[0]
    assert command[:3] == [sys.executable, "-m", "infralens.attention.dram"]
    assert "--causal" in command and command[command.index("--seq") + 1] == "256"
    assert "TRITON_INTERPRET" not in env  # the driver compiles for the GPU


def test_driver_rejects_bad_input_in_one_line(capsys):
    assert dram.main(["--impl", "nope"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert dram.main(["--impl", "triton", "--seq", "64"]) == 2
        assert "no CUDA GPU" in capsys.readouterr().err
