"""The shipped config.json files: one per source repository, each loading, each the published model."""

from __future__ import annotations

import json

import pytest

from infralens.models import ConfigError, load_config
from infralens.models.shipped import SOURCES, shipped_config, shipped_config_names


def test_shipped_names_match_sources_and_files():
    assert shipped_config_names() == tuple(sorted(SOURCES))
    assert len(SOURCES) == 11


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_shipped_config_loads(name):
    raw = shipped_config(name)
    shape = load_config(raw)
    assert shape.family == raw["model_type"]
    assert shape.n_layers == raw.get("num_hidden_layers", raw.get("n_layer"))


def test_shipped_config_is_a_fresh_copy():
    shipped_config("gpt2")["n_embd"] = 1
    assert shipped_config("gpt2")["n_embd"] == 768


def test_unknown_shipped_name_lists_choices():
    with pytest.raises(ConfigError, match="gpt2-medium"):
        shipped_config("gpt5")


# Published architectures (model cards and papers): d_model, layers, query heads, KV heads, vocab.
PUBLISHED = {
    "gpt2": (768, 12, 12, 12, 50257),             # Radford et al. 2019, GPT-2 small
    "gpt2-medium": (1024, 24, 16, 16, 50257),
    "llama-2-7b": (4096, 32, 32, 32, 32000),      # Touvron et al. 2023, Table 1 / model card
    "llama-2-13b": (5120, 40, 40, 40, 32000),
    "llama-3-8b": (4096, 32, 32, 8, 128256),      # Meta Llama 3 model card: GQA for both sizes
    "llama-3-70b": (8192, 80, 64, 8, 128256),
    "mistral-7b-v0.1": (4096, 32, 32, 8, 32000),  # Jiang et al. 2023, Table 1
    "mixtral-8x7b-v0.1": (4096, 32, 32, 8, 32000),  # Jiang et al. 2024: 8 experts, top-2
    "qwen2-0.5b": (896, 24, 14, 2, 151936),       # Qwen2 technical report, Table 1
    "qwen2-7b": (3584, 28, 28, 4, 152064),
    "tinyllama-1.1b": (2048, 22, 32, 4, 32000),   # Zhang et al. 2024
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_each_file_is_the_published_architecture(name):
    shape = load_config(shipped_config(name))
    got = (shape.d_model, shape.n_layers, shape.n_heads, shape.n_kv_heads, shape.vocab_size)
    assert got == PUBLISHED[name]
    assert shape.is_moe == (name == "mixtral-8x7b-v0.1")


def test_every_source_is_a_hugging_face_repository_and_every_file_has_one():
    assert sorted(PUBLISHED) == sorted(SOURCES) == list(shipped_config_names())
    for repo in SOURCES.values():
        owner, _, model = repo.partition("/")
        assert owner and model and "/" not in model, repo


def test_shipped_files_are_json_objects_as_published(tmp_path):
    from importlib import resources

    folder = resources.files("infralens.models").joinpath("configs")
    for name in shipped_config_names():
        text = folder.joinpath(f"{name}.json").read_text(encoding="utf-8")
        assert json.loads(text) == shipped_config(name)
        # the same file through the path reader gives the same shape
        path = tmp_path / f"{name}.json"
        path.write_text(text)
        assert load_config(path) == load_config(shipped_config(name))


def test_an_unknown_name_is_a_config_error_in_one_line():
    with pytest.raises(ConfigError) as info:
        shipped_config("../../etc/passwd")
    assert "no shipped config" in str(info.value) and "\n" not in str(info.value)
