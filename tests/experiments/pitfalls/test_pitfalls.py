"""``vitlab compare --preset pitfalls``: the grids it plans, how one training serves several grids, and
verdicts decided by the seed spread -- from records made up to know the answer, then a tiny real run."""

import json
import math

import pytest

import vitlab.experiments.pitfalls as pitfalls
from vitlab.cli.main import main
from vitlab.experiments import CompareConfig, RunRecord, plan_compare
from vitlab.experiments.pitfalls import (
    PROFILES,
    Effect,
    Part,
    Study,
    count_parts,
    effect_parts,
    execution_groups,
    overall,
    pitfalls_for,
    plan_studies,
    point_parts,
    trend_part,
)

DIGITS = {"num_classes": 10, "in_chans": 1, "img_size": (8, 8)}
TINY = pitfalls.Profile(
    "digits",
    "vit-digits",
    "cnn-digits",
    rows=100,
    epochs=1,
    patch=2,
    patches=(2, 4),
    stride=1,
    sweep=((60, 1), (None, 1)),
    lrs=(1e-3, 1e-2),
    test_protocol=None,
)


def record(key, value, **fields):
    base = dict(
        key=key,
        kind="vit",
        model="vit-digits",
        widths=None,
        axes={},
        train_rows=100,
        params=1,
        best_val_acc=value,
        best_epoch=1,
        final_train_acc=value,
        gap=0.0,
        val_ece=0.0,
        test_acc=value,
        seconds=1.0,
        curves={"val_acc": [value]},
    )
    return RunRecord(**{**base, **fields})


def fake_study(config, values):
    """A planned study whose ViT records score ``values(axes)``."""
    plan = plan_compare(config, DIGITS)
    records = {cell.vit: record(cell.vit, values(cell.axes), axes=cell.axes) for cell in plan.cells}
    return Study("fake", config, plan, records)


def test_a_switch_that_costs_accuracy_in_every_seed_is_reproduced():
    config = CompareConfig(rows=[100], patches=[2], augment=["none"], seeds=3, norm=["layernorm", "batchnorm"])
    study = fake_study(config, lambda axes: 0.8 - 0.1 * (axes["norm"] == "batchnorm") + 0.01 * axes["seed"])
    (part,) = effect_parts(study, Effect("norm", "batchnorm", "layernorm", "best_val_acc", -1, "accuracy"))
    assert part.mean == pytest.approx(-0.1) and part.band == pytest.approx(0) and part.verdict == "reproduced"
    assert part.seeds == 3 and part.condition == "the base cell"
    (other,) = effect_parts(study, Effect("norm", "batchnorm", "layernorm", "best_val_acc", 1, "accuracy"))
    assert other.verdict == "not reproduced"


def test_a_claim_that_holds_in_some_conditions_names_them():
    config = CompareConfig(
        rows=[100], patches=[2], augment=["none"], seeds=3, block=["prenorm", "postnorm"], lr=[1e-3, 1e-2]
    )
    noise = {0: 0.02, 1: -0.01, 2: 0.0}

    def score(axes):  # post-norm breaks at lr 0.01 only; at 0.001 the seeds disagree
        broken = axes["block"] == "postnorm" and axes["lr"] == 1e-2
        jitter = noise[axes["seed"]] if axes["block"] == "postnorm" else 0
        return 0.2 if broken else 0.8 + jitter

    parts = effect_parts(fake_study(config, score), Effect("block", "postnorm", "prenorm", "best_val_acc", -1, "acc"))
    verdicts = {p.condition: p.verdict for p in parts}
    assert verdicts == {"lr 0.001": "inconclusive", "lr 0.01": "reproduced"}
    assert overall(parts) == "holds only when lr 0.01"


@pytest.mark.parametrize(
    "found,expected",
    [
        (["reproduced", "reproduced"], "reproduced"),
        (["not reproduced", "inconclusive"], "not reproduced"),
        (["inconclusive"], "inconclusive"),
        ([], "inconclusive"),
    ],
)
def test_overall_verdict_words(found, expected):
    assert overall([Part(str(i), 0, 0, 3, 0, 0, v) for i, v in enumerate(found)]) == expected


def test_a_point_claim_is_reproduced_within_two_standard_errors():
    config = CompareConfig(rows=[100], patches=[2], augment=["none"], seeds=3)
    study = fake_study(config, lambda axes: (0.76, 0.77, 0.78)[axes["seed"]])
    (near,) = point_parts(study, "test_acc", 0.765)  # mean 0.77, 2 SE = 2 * 0.01 / sqrt(3)
    assert near.verdict == "reproduced" and near.band == pytest.approx(2 * 0.01 / math.sqrt(3))
    (far,) = point_parts(study, "test_acc", 0.74)
    assert far.verdict == "not reproduced"


def test_the_change_with_rows_is_judged_by_both_spreads():
    small = Part("60 rows", -0.3, 0, 3, 0, 0, "reproduced", differences=[-0.31, -0.3, -0.29])
    large = Part("the whole pool", -0.05, 0, 3, 0, 0, "reproduced", differences=[-0.06, -0.05, -0.04])
    caught_up = trend_part(small, large, 1)
    assert caught_up.mean == pytest.approx(0.25) and caught_up.verdict == "reproduced"
    assert trend_part(large, small, 1).verdict == "not reproduced"


def test_the_overlapping_tokenizer_is_counted_by_running_it():
    config = CompareConfig(rows=[100], patches=[2], augment=["none"], seeds=2, stride=["patch", "1"])
    (part,) = count_parts(Study("overlap", config, plan_compare(config, DIGITS)), DIGITS)
    assert part.verdict == "reproduced" and part.value_mean == 49 and part.baseline_mean == 16


def test_every_pitfall_plans_its_grid_and_one_training_serves_several_grids(monkeypatch):
    studies = plan_studies(TINY, seeds=2)
    keys = {p.key for p in pitfalls_for(TINY)}
    assert {s.pitfall for s in studies} == keys and "huge-data" in keys
    for study in studies:
        has_cnn = any(r.kind == "cnn" for r in study.plan.runs)
        assert has_cnn == (study.pitfall == "huge-data")
    positions = next(s for s in studies if s.pitfall == "positions")
    assert positions.config.permute and {r.axes["position"] for r in positions.plan.runs} == {
        "abs",
        "sincos",
        "rope",
        "none",
    }
    groups = execution_groups(studies)
    assert len(groups) == 1  # every grid here trains for one epoch: one execution group
    merged = [run for _, plan, _ in groups for run in plan.runs]
    assert len(merged) < sum(len(s.plan.runs) for s in studies)  # the same key planned by two grids runs once
    assert all(config.permute for config, plan, members in groups if 0 in members)


def test_the_preset_takes_only_seeds_dataset_and_how_to_run(tmp_path, capsys):
    assert main(["compare", "--preset", "pitfalls", "--rows", "100", "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err
    assert "--preset pitfalls sets its own grids" in err and "--rows" in err and len(err.strip().splitlines()) == 1
    assert main(["compare", "--preset", "pitfalls", "--dataset", "cifar10", "--out", str(tmp_path / "q")]) == 2
    assert "runs on fashion-mnist or digits" in capsys.readouterr().err
    assert main(["compare", "--preset", "pitfalls", "--seeds", "1", "--out", str(tmp_path / "r")]) == 2
    assert "seed spread" in capsys.readouterr().err
    assert not any((tmp_path / d).exists() for d in "pqr")


@pytest.mark.slow
def test_a_tiny_pitfalls_run_writes_every_verdict(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(PROFILES, "digits", TINY)
    out = tmp_path / "pitfalls"
    assert (
        main(
            [
                "compare",
                "--preset",
                "pitfalls",
                "--dataset",
                "digits",
                "--seeds",
                "2",
                "--jobs",
                "1",
                "--quiet",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    results = json.loads((out / "results.json").read_text())
    claims = {v["key"] for v in results["verdicts"]}
    assert claims == {p.key for p in pitfalls_for(TINY)}
    allowed = ("reproduced", "not reproduced", "inconclusive")
    assert all(v["verdict"] in allowed or v["verdict"].startswith("holds only when") for v in results["verdicts"])
    positions = next(v for v in results["verdicts"] if v["measured"].startswith("agreement"))
    (part,) = positions["parts"]
    assert part["value_mean"] == 1.0  # without positions the shuffled image is the same image to the ViT
    report = (out / "report.md").read_text()
    assert "## Verdicts" in report and "## The grids" in report and "| Claim |" in printed
