"""The memory calculator's command line in-process: flags become a config, the config a report."""

from __future__ import annotations

import pytest

from infralens.memory.cli import build_parser, main, render_report
from infralens.models import load_config, shipped_config

LLAMA_3_8B = ["--family", "llama", "--hidden", "4096", "--layers", "32", "--heads", "32",
              "--kv-heads", "8", "--ffn", "14336", "--vocab", "128256"]


def test_main_returns_status_codes(capsys):
    assert main(["--model", "qwen2-0.5b"]) == 0
    assert "494,032,768" in capsys.readouterr().out
    assert main(["--model", "qwen2-0.5b", "--batch", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_synthetic_flags_give_the_published_config():
    # The flags of Llama-3-8B's model card, as a config.json: the shipped file's shape exactly.
    from infralens.memory.cli import _synthetic_config

    args = build_parser().parse_args(LLAMA_3_8B)
    assert load_config(_synthetic_config(args)) == load_config(shipped_config("llama-3-8b"))
    gpt2 = build_parser().parse_args(["--family", "gpt2", "--hidden", "768", "--layers", "12",
                                      "--heads", "12", "--vocab", "50257", "--positions", "1024"])
    assert load_config(_synthetic_config(gpt2)) == load_config(shipped_config("gpt2"))


def test_synthetic_run_prints_the_same_report_as_the_shipped_model(capsys):
    assert main(LLAMA_3_8B) == 0
    synthetic = capsys.readouterr().out
    assert main(["--model", "llama-3-8b"]) == 0
    shipped = capsys.readouterr().out
    assert synthetic.replace("synthetic llama", "llama-3-8b") == shipped
    assert "8,030,261,248" in shipped  # Llama-3-8B's parameter count


def test_report_header_and_sections():
    args = build_parser().parse_args(["--model", "mixtral-8x7b-v0.1", "--batch", "2", "--seq-len",
                                      "4096", "--tp", "2", "--sequence-parallel"])
    report = render_report("mixtral", load_config(shipped_config("mixtral-8x7b-v0.1")), args)
    header, params, training, inference, footer = report.split("\n\n")
    assert header.startswith("mixtral (mixtral): d_model 4096, 32 layers, 32 heads (8 KV, head_dim 128)")
    assert header.endswith("8 experts (top-2)")
    assert params.startswith("Parameters") and "46,702,792,704" in params
    assert "batch 2 x 4,096 tokens" in training and "tensor parallel 2 + sequence parallel" in training
    assert inference.startswith("Inference: batch 2 x 4,096 tokens, weights 2 B/param")
    assert footer.startswith("Not in these ledgers: ")


@pytest.mark.parametrize("argv, words", [
    (["--family", "gpt2", "--hidden", "8", "--layers", "1", "--heads", "2", "--vocab", "5"],
     "--family gpt2 needs --positions"),
    ([*LLAMA_3_8B, "--experts", "8"], "--experts does not apply to --family llama"),
    (["--model", "gpt2", "--optimizer", "lion"], "invalid choice"),
])
def test_bad_flags_are_one_line(argv, words, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("infralens.memory: error: ") and words in err and err.count("\n") == 1


def test_help_is_status_0(capsys):
    assert main(["--help"]) == 0
    assert "--hf-config" in capsys.readouterr().out


def test_a_learned_position_table_bounds_the_sequence(capsys):
    # GPT-2 learns 1,024 positions: the default sequence stops there, a longer one is refused.
    assert main(["--model", "gpt2"]) == 0
    assert "batch 1 x 1,024 tokens" in capsys.readouterr().out
    assert main(["--model", "gpt2", "--seq-len", "1024"]) == 0
    capsys.readouterr()
    assert main(["--model", "gpt2", "--seq-len", "4096"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--seq-len 4,096 is past gpt2's 1,024 positions" in err
    assert main(["--model", "llama-3-8b", "--seq-len", "32768"]) == 0  # rotary: no table to run past
    assert "batch 1 x 32,768 tokens" in capsys.readouterr().out
    assert main(["--model", "llama-3-8b"]) == 0
    assert "batch 1 x 2,048 tokens" in capsys.readouterr().out
