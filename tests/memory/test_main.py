"""``python -m infralens.memory`` as a user runs it: in a subprocess, reading its streams."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
LLAMA_3_8B = ["--family", "llama", "--hidden", "4096", "--layers", "32", "--heads", "32",
              "--kv-heads", "8", "--ffn", "14336", "--vocab", "128256"]


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", "infralens.memory", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def write(tmp_path: Path, content: object) -> str:
    path = tmp_path / "config.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def good_llama(**changes: object) -> dict:
    cfg = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096,
           "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32}
    return {k: v for k, v in {**cfg, **changes}.items() if v is not None}


# --- good runs ---------------------------------------------------------------------------------


def test_shipped_model():
    result = run("--model", "gpt2")
    assert result.returncode == 0, result.stderr
    assert "124,439,808" in result.stdout
    assert "Training" in result.stdout and "Inference" in result.stdout
    assert result.stderr == ""


def test_hf_config_file():
    path = SRC / "infralens" / "models" / "configs" / "mixtral-8x7b-v0.1.json"
    result = run("--hf-config", str(path), "--batch", "2", "--seq-len", "4096",
                 "--precision", "amp", "--recompute", "selective")
    assert result.returncode == 0, result.stderr
    assert "46,702,792,704" in result.stdout and "8 experts (top-2)" in result.stdout


def test_synthetic_family_reproduces_llama_3_8b():
    result = run(*LLAMA_3_8B, "--tp", "8", "--sequence-parallel")
    assert result.returncode == 0, result.stderr
    assert "8,030,261,248" in result.stdout
    # Mixed-precision AdamW: 2 + 2 + 4 + 8 bytes per parameter.
    assert "16 B/param" in result.stdout
    assert "16,060,522,496" in result.stdout  # 2 x params: 16-bit weights (and gradients)
    assert "64,242,089,984" in result.stdout  # 8 x params: Adam's two fp32 moments


def test_help_lists_the_shipped_models():
    result = run("--help")
    assert result.returncode == 0
    assert "llama-3-70b" in result.stdout and "mixtral-8x7b-v0.1" in result.stdout


# --- bad input: exit 2, exactly one line on stderr, no traceback -------------------------------

BAD_CONFIGS = {
    "missing key": (good_llama(hidden_size=None), "missing required key 'hidden_size'"),
    "heads do not divide hidden": (good_llama(num_attention_heads=30), "does not divide"),
    "kv heads do not divide heads": (good_llama(num_key_value_heads=5), "not divisible"),
    "negative size": (good_llama(num_hidden_layers=-2), "must be a positive integer"),
    "unknown model_type": (good_llama(model_type="bert"), "unknown model_type 'bert'"),
    "not an object": ([1, 2], "must be a JSON object"),
    "malformed JSON": ('{"model_type": "llama",', "is not valid JSON"),
}


def assert_one_line_error(result: subprocess.CompletedProcess[str], fragment: str) -> None:
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("infralens.memory: error: ")
    assert fragment in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize(("content", "fragment"), BAD_CONFIGS.values(), ids=BAD_CONFIGS.keys())
def test_bad_config_file(tmp_path, content, fragment):
    assert_one_line_error(run("--hf-config", write(tmp_path, content)), fragment)


BAD_ARGS = {
    "missing file": (["--hf-config", "/nonexistent/config.json"], "cannot read config file"),
    "directory": (["--hf-config", "/"], "cannot read config file"),
    "no model given": ([], "one of the arguments"),
    "two models given": (["--model", "gpt2", *LLAMA_3_8B], "not allowed with"),
    "unknown shipped model": (["--model", "gpt5"], "invalid choice"),
    "unknown flag": (["--model", "gpt2", "--gpus", "8"], "unrecognized arguments"),
    "negative flag": (["--model", "gpt2", "--batch", "-1"], "positive integer"),
    "non-integer flag": (["--model", "gpt2", "--seq-len", "2k"], "positive integer"),
    "negative synthetic size": ([*LLAMA_3_8B[:-1], "-5"], "positive integer"),
    "family missing a size": (LLAMA_3_8B[:-2], "--family llama needs --vocab"),
    "flag not for family": ([*LLAMA_3_8B, "--positions", "1024"], "does not apply"),
    "synthetic kv heads do not divide": ([*LLAMA_3_8B, "--kv-heads", "5"], "not divisible"),
    "synthetic heads do not divide hidden": (
        ["--family", "mistral", "--hidden", "4096", "--layers", "2", "--heads", "30",
         "--kv-heads", "10", "--ffn", "64", "--vocab", "10"], "does not divide"),
    "tp does not divide heads": (["--model", "gpt2", "--tp", "5"], "must divide heads"),
}


@pytest.mark.parametrize(("args", "fragment"), BAD_ARGS.values(), ids=BAD_ARGS.keys())
def test_bad_arguments(args, fragment):
    assert_one_line_error(run(*args), fragment)
