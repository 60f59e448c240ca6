"""Real Hugging Face ``config.json`` files that ship with the package, so the lab runs offline.

Each file under ``configs/`` is the model repository's ``config.json`` as published; the
name is the file name without ``.json``. :data:`SOURCES` says which repository it came from.
"""

from __future__ import annotations

import json
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from infralens.models.config import ConfigError

#: Shipped config name -> the Hugging Face model repository its ``config.json`` comes from.
SOURCES: dict[str, str] = {
    "gpt2": "openai-community/gpt2",
    "gpt2-medium": "openai-community/gpt2-medium",
    "llama-2-7b": "meta-llama/Llama-2-7b-hf",
    "llama-2-13b": "meta-llama/Llama-2-13b-hf",
    "llama-3-8b": "meta-llama/Meta-Llama-3-8B",
    "llama-3-70b": "meta-llama/Meta-Llama-3-70B",
    "mistral-7b-v0.1": "mistralai/Mistral-7B-v0.1",
    "mixtral-8x7b-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "qwen2-0.5b": "Qwen/Qwen2-0.5B",
    "qwen2-7b": "Qwen/Qwen2-7B",
    "tinyllama-1.1b": "TinyLlama/TinyLlama-1.1B-Chat-v1.0",
}


def _configs_dir() -> Traversable:
    return resources.files("infralens.models").joinpath("configs")


def shipped_config_names() -> tuple[str, ...]:
    """Names of the shipped configs, sorted (``"gpt2"``, ``"llama-3-8b"``, ...)."""
    files = _configs_dir().iterdir()
    return tuple(sorted(f.name.removesuffix(".json") for f in files if f.name.endswith(".json")))


def shipped_config(name: str) -> dict[str, Any]:
    """The shipped ``config.json`` called ``name``, as a fresh dict (safe to modify)."""
    if name not in SOURCES:
        raise ConfigError(f"no shipped config {name!r}; choose from: {', '.join(SOURCES)}")
    text = _configs_dir().joinpath(f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)
