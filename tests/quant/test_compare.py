"""The comparison runner end to end on a tiny plan: one row per cell, bytes in the order the formats
say, deltas against the FP32 row, outliers found where they are, and the command line's output."""

from __future__ import annotations

import json
import math

import pytest
import torch

from infralens.quant import compare as C
from infralens.quant.plan import plan_from_dict

TINY = {
    "data": {"train_bytes": 20_000, "held_out_bytes": 2_000, "calibration_sequences": 4},
    "group_size": 16,
    "models": {"t": {"d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 32, "batch": 8,
                     "steps": 20, "lr": 0.01}},
    "methods": {"rtn": {"int8": ["channel"], "int4": ["group"]}, "gptq": {"int4": ["group"]},
                "smoothquant": {"int8": ["tensor"]}, "fp8": {"e4m3": ["tensor"]}},
}


@pytest.fixture(scope="module")
def result():
    return C.run_plan(plan_from_dict(TINY))


def test_one_row_per_cell_after_the_two_references(result):
    (m,) = result["models"]
    labels = [f"{r['method']} {r['format']} {r['granularity']}" for r in m["rows"]]
    assert labels == ["fp32 fp32 -", "bf16 bf16 -", "rtn int8 channel", "rtn int4 group",
                      "gptq int4 group", "smoothquant int8 tensor", "fp8 e4m3 tensor"]
    rows = {lab: r for lab, r in zip(labels, m["rows"], strict=True)}
    assert rows["fp32 fp32 -"]["delta_pct"] == 0
    assert all(math.isfinite(r["ppl"]) and r["ppl"] > 1 for r in m["rows"])
    assert all(r["delta_pct"] == pytest.approx(100 * (r["ppl"] / m["rows"][0]["ppl"] - 1))
               for r in m["rows"])
    assert rows["fp32 fp32 -"]["delta_pct_se"] == 0 and rows["rtn int4 group"]["delta_pct_se"] > 0
    n_windows = (TINY["data"]["held_out_bytes"] - 1) // TINY["models"]["t"]["seq_len"]
    assert all(len(r["window_losses"]) == n_windows for r in m["rows"])
    change, se = C.compare_rows(m, "rtn int4 group", "fp32 fp32 -")
    assert change == pytest.approx(rows["rtn int4 group"]["delta_pct"], abs=1e-3) and se > 0
    nbytes = [rows[k]["weight_bytes"] for k in ("rtn int4 group", "rtn int8 channel", "bf16 bf16 -",
                                               "fp32 fp32 -")]
    assert nbytes == sorted(nbytes) and nbytes[3] == 2 * nbytes[2]
    assert abs(rows["bf16 bf16 -"]["delta_pct"]) < abs(rows["rtn int4 group"]["delta_pct"]) + 1e-9
    json.dumps(result, allow_nan=False)                       # a record must be JSON


def test_training_learned_the_text(result):
    (m,) = result["models"]
    assert m["final_loss"] < m["losses"][0] and m["rows"][0]["ppl"] < 256
    assert len(m["absmax"]) == 4 and result["python"]


def test_calibration_windows_are_spread_through_the_stream():
    tokens = torch.arange(1000)
    w = C.calibration_windows(tokens, 4, 10)
    assert w.shape == (4, 10) and w[0, 0] == 0 and w[-1, -1] == 999 - 1
    assert (w[:, 1:] - w[:, :-1] == 1).all()


def test_outlier_summary_finds_the_planted_channel():
    a = torch.ones(64)
    a[17] = 10.0
    (row,) = C.outlier_summary({"layer": a})
    assert row["outliers"] == [17] and row["ratio"] == 10.0 and row["median"] == 1.0


def test_command_line_prints_the_matrix(tmp_path, capsys):
    import yaml

    plan = dict(TINY, methods={"rtn": {"int4": ["channel"]}})
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(plan))
    out = tmp_path / "r.json"
    assert C.main([str(tmp_path / "p.yaml"), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "model t:" in text and "rtn" in text and "int4" in text
    assert json.loads(out.read_text())["models"][0]["name"] == "t"
