"""The comparison plan: the shipped plans load and agree on the methods, and every kind of mistake
is refused with one line that names it."""

from __future__ import annotations

import copy

import pytest

from infralens.quant import plan as P

GOOD = {
    "data": {"train_bytes": 10_000, "held_out_bytes": 1_000, "calibration_sequences": 4},
    "group_size": 16,
    "models": {"m": {"d_model": 32, "n_layers": 1, "n_heads": 2, "seq_len": 16, "batch": 4,
                     "steps": 3, "lr": 0.01}},
    "methods": {"rtn": {"int4": ["channel", "group"]}, "fp8": {"e4m3": "tensor"}},
}


def test_shipped_plans_run_the_same_matrix():
    small, full = (P.load_plan(P.shipped_plan(name)) for name in ("small", "full"))
    assert small.methods == full.methods
    cells = list(small.cells())
    assert len(cells) == sum(len(g) for f in small.methods.values() for g in f.values())
    assert {c.method for c in cells} == set(P.METHODS)        # every method the runner knows


def test_cells_follow_the_plan_and_carry_their_bits():
    plan = P.plan_from_dict(GOOD)
    assert [c.label for c in plan.cells()] == ["rtn int4 channel", "rtn int4 group", "fp8 e4m3 tensor"]
    assert [c.bits for c in plan.cells()] == [4, 4, 8]
    assert plan.smoothquant_alpha == 0.5 and plan.models[0].lr == 0.01


def _broken(path, value):
    raw = copy.deepcopy(GOOD)
    *parents, last = path
    node = raw
    for key in parents:
        node = node[key]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return raw


@pytest.mark.parametrize("path, value, fragment", [
    (("methods", "bogus"), {"int4": ["group"]}, "unknown method 'bogus'"),
    (("methods", "gptq"), {"e4m3": ["tensor"]}, "method 'gptq' takes formats int8, int4"),
    (("methods", "awq"), {"int4": ["tensor"]}, "'awq' int4 takes granularities channel, group"),
    (("methods", "rtn"), {"int4": ["group", "group"]}, "listed twice"),
    (("methods", "rtn"), {"int4": []}, "give a list of granularities"),
    (("methods",), {}, "'methods' is empty"),
    (("models",), {}, "'models' is empty"),
    (("models", "m", "d_model"), 31, "not divisible by n_heads=2"),
    (("models", "m", "steps"), True, "'steps' in model 'm' must be a positive integer"),
    (("models", "m", "batch"), -1, "'batch' in model 'm' must be a positive integer"),
    (("models", "m", "lr"), 0, "'lr' in model 'm' must be a number in (0, 1]"),
    (("models", "m", "width"), 3, "unknown field 'width' in model 'm'"),
    (("data", "train_bytes"), KeyError, "missing field 'train_bytes'"),
    (("data", "held_out_bytes"), 10, "too few windows"),
    (("data", "calibration_sequences"), 10_000, "more than the training windows"),
    (("group_size",), 24, "group_size=24 must divide"),
    (("smoothquant_alpha",), 1.5, "'smoothquant_alpha' in the plan must be a number in (0, 1]"),
    (("extra",), 1, "unknown field 'extra' in the plan"),
])
def test_a_broken_plan_names_its_mistake(path, value, fragment):
    with pytest.raises(P.PlanError, match=None) as err:
        P.plan_from_dict(_broken(path, value))
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_files_that_are_not_plans(tmp_path):
    (tmp_path / "bad.yaml").write_text("data: [unclosed\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(P.PlanError, match="not valid YAML"):
        P.load_plan(tmp_path / "bad.yaml")
    with pytest.raises(P.PlanError, match="a plan must be a mapping, got list"):
        P.load_plan(tmp_path / "list.yaml")
    with pytest.raises(P.PlanError, match="cannot read plan file"):
        P.load_plan(tmp_path / "none.yaml")
    with pytest.raises(P.PlanError, match="no shipped plan 'none'"):
        P.shipped_plan("none")
