"""One training step measured on the CPU by adding up tensor bytes."""

from __future__ import annotations

import json

import pytest
import torch

from infralens.memory.measure import PHASES, measure_cpu_step, measure_training_step
from infralens.models.gpt import GPTConfig

B, T, D, H = 2, 16, 32, 4


def tiny(n_layers: int = 2) -> GPTConfig:
    return GPTConfig(vocab_size=64, n_positions=T, d_model=D, n_layers=n_layers, n_heads=H)


@pytest.fixture(scope="module")
def fp32_step() -> dict:
    return measure_cpu_step(tiny(), B, T, precision="fp32")


def test_phases_and_json(fp32_step):
    assert tuple(fp32_step["phases"]) == PHASES
    assert fp32_step["measured_by"] == "tensor_bytes"
    json.dumps(fp32_step)  # plain JSON-able
    for p in fp32_step["phases"].values():
        assert p["allocated"] == sum(p["breakdown"].values()) and p["peak"] is None


def test_fp32_adamw_bytes(fp32_step):
    psi = fp32_step["num_params"]
    n_tensors = fp32_step["num_param_tensors"]
    ph = {k: v["breakdown"] for k, v in fp32_step["phases"].items()}
    for name in PHASES:
        assert ph[name]["params"] == 4 * psi  # fp32 weights, tied embedding counted once
    assert ph["model"]["grads"] == ph["forward"]["grads"] == 0
    assert ph["forward"]["activations"] > 0
    assert ph["backward"] == {"params": 4 * psi, "grads": 4 * psi,
                              "optimizer_state": 0, "activations": 0}
    # exp_avg + exp_avg_sq: 8 bytes per parameter, plus AdamW's per-tensor `step`, a 0-dim
    # float32 tensor (kept on the CPU when fused=False and capturable=False): 4 bytes each.
    assert ph["step"]["grads"] == 4 * psi
    assert ph["step"]["optimizer_state"] == 8 * psi + 4 * n_tensors
    assert ph["zero_grad"]["grads"] == 0
    assert ph["zero_grad"]["optimizer_state"] == 8 * psi + 4 * n_tensors
    assert fp32_step["activation_bytes_measured"] == ph["forward"]["activations"]


def test_activations_per_layer():
    """Each extra block adds what it saves for backward: ~64 bytes x tokens x d in fp32
    (LayerNorm in/out 4+4+4+4, QKV out 12, attention out 4, MLP hidden 16 + 16), plus
    LayerNorm statistics and the attention logsumexp; with checkpointing only its 4-byte input.
    """
    tokens_d = B * T * D

    def act(n_layers: int, checkpoint: bool) -> int:
        r = measure_cpu_step(tiny(n_layers), B, T, checkpoint=checkpoint)
        return r["activation_bytes_measured"]

    per_layer_ckpt = act(2, True) - act(1, True)
    assert per_layer_ckpt == 4 * tokens_d
    per_layer = act(2, False) - act(1, False)
    assert 64 * tokens_d <= per_layer <= 66 * tokens_d


def test_checkpoint_same_loss_less_activation():
    plain = measure_cpu_step(tiny(), B, T)
    ckpt = measure_cpu_step(tiny(), B, T, checkpoint=True)
    assert plain["loss"] == ckpt["loss"]
    assert ckpt["activation_bytes_measured"] < plain["activation_bytes_measured"]
    for name in ("backward", "step", "zero_grad"):
        assert plain["phases"][name] == ckpt["phases"][name]


def test_amp_keeps_fp32_state():
    r = measure_cpu_step(tiny(), B, T, precision="amp")
    psi = r["num_params"]
    assert r["phases"]["backward"]["breakdown"]["grads"] == 4 * psi


def test_errors():
    with pytest.raises(ValueError):
        measure_cpu_step(tiny(), B, T, precision="fp16")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA is not available"):
            measure_training_step(tiny(), B, T, device="cuda")
