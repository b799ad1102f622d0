"""``compare``'s pitfall axes (block, norm, mask, stride), the other position kinds, the ViT-only lr and
warmup, diverged runs, the permutation probe and the eval-mode reading of training accuracy."""

import json

import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.errors import ConfigError, DivergenceError
from vitlab.experiments import CompareConfig, plan_compare, run_compare
from vitlab.experiments.axes import variant_words
from vitlab.experiments.execution import train_config
from vitlab.experiments.scoring import diverged_record
from vitlab.models import build_registered, count_params

GREY28 = {"num_classes": 10, "in_chans": 1, "img_size": (28, 28)}
ONE_CELL = dict(rows=[50], augment=["none"], dataset="fashion-mnist", cnns=["textbook"])


def vits_by(plan, axis):
    return {r.axes[axis]: r for r in plan.runs if r.kind == "vit"}


@pytest.mark.parametrize(
    "axis,values,expected",
    [
        (
            "position",
            ["abs", "sincos", "rowcol", "rope", "none"],
            {
                "abs": {},
                "sincos": {"pos_embed": "sincos2d"},
                "rowcol": {"pos_embed": "rowcol"},
                "rope": {"pos_embed": "rope"},
                "none": {"pos_embed": "none"},
            },
        ),
        ("block", ["prenorm", "postnorm"], {"prenorm": {}, "postnorm": {"block": "postnorm"}}),
        ("norm", ["layernorm", "batchnorm"], {"layernorm": {}, "batchnorm": {"block_norm": "batchnorm"}}),
        ("mask", ["none", "causal"], {"none": {}, "causal": {"causal": True}}),
        ("stride", ["patch", "4"], {"patch": {}, "4": {"patch_stride": 4}}),
    ],
)
def test_each_pitfall_axis_enters_the_plan_with_its_overrides(axis, values, expected):
    plan = plan_compare(CompareConfig(**ONE_CELL, patches=[7], **{axis: values}), GREY28)
    assert [a.name for a in plan.axes] == ["seed", "rows", "augment", "patch", axis, "cnn"]
    vits = vits_by(plan, axis)
    assert {v: r.overrides for v, r in vits.items()} == {v: {"patch_size": 7, **o} for v, o in expected.items()}
    for run in vits.values():
        assert run.params == count_params(build_registered("vit-seed", **GREY28, **run.overrides))
    # the fixed textbook CNN is trained once for every value of a ViT-only axis
    assert len([r for r in plan.runs if r.kind == "cnn"]) == 1


def test_lr_and_warmup_train_the_vit_alone():
    config = CompareConfig(**ONE_CELL, patches=[7], block=["prenorm", "postnorm"], lr=[1e-3, 1e-2], warmup=[0, 2])
    plan = plan_compare(config, GREY28)
    vits = [r for r in plan.runs if r.kind == "vit"]
    assert len(vits) == 8 and {(r.train["lr"], r.train["warmup_epochs"]) for r in vits} == {
        (lr, w) for lr in (1e-3, 1e-2) for w in (0, 2)
    }
    (cnn,) = [r for r in plan.runs if r.kind == "cnn"]
    assert "lr" not in cnn.train and train_config(config, cnn).lr == 3e-3  # the recipe's (default)
    assert train_config(config, vits[-1]).warmup_epochs == 2 and train_config(config, vits[-1]).lr == 1e-2
    # None is the recipe's own value and adds no field
    plain = plan_compare(CompareConfig(**ONE_CELL, patches=[7], lr=[None, 3e-3]), GREY28)
    assert sorted(r.train.get("lr", 0) for r in plain.runs if r.kind == "vit") == [0, 3e-3]


def test_combinations_that_cannot_be_built_are_skipped_with_the_reason():
    plan = plan_compare(
        CompareConfig(
            **ONE_CELL, patches=[4, 7], stride=["patch", "4"], mask=["none", "causal"], attention=["full", "linear"]
        ),
        GREY28,
    )
    reasons = {tuple(sorted(s["axes"].items())): s["reason"] for s in plan.skipped}
    stride_at_4 = [r for axes, r in reasons.items() if ("patch", 4) in axes and ("stride", "4") in axes]
    assert stride_at_4 and all("does not make patch 4's windows overlap" in r for r in stride_at_4)
    causal_linear = [
        r
        for axes, r in reasons.items()
        if ("mask", "causal") in axes and ("attention", "linear") in axes and ("stride", "patch") in axes
    ]
    assert causal_linear and all("causal mask" in r for r in causal_linear)
    assert all(build_registered("vit-seed", **GREY28, **r.overrides) for r in plan.runs if r.kind == "vit")


def test_a_combination_the_model_refuses_is_skipped_in_its_own_words(monkeypatch):
    import vitlab.experiments.plan as plan_module

    monkeypatch.setattr(plan_module, "skip_reason", lambda *args: None)  # only the model itself refuses now
    plan = plan_compare(CompareConfig(**ONE_CELL, patches=[7], stride=["patch", "8"]), GREY28)
    (skipped,) = plan.skipped
    assert skipped["axes"]["stride"] == "8" and "patch_stride 8 exceeds patch_size 7" in skipped["reason"]
    assert [r.axes["stride"] for r in plan.runs if r.kind == "vit"] == ["patch"]


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"stride": ["patch", "x"]}, "stride values"),
        ({"lr": [0]}, "lr must be a number in"),
        ({"lr": [1000]}, "lr must be a number in"),
        ({"warmup": [-1]}, "warmup_epochs must be"),
        ({"lr": ["fast"]}, "lr values are numbers"),
        ({"mask": ["future"]}, "unknown mask"),
        ({"norm": ["groupnorm"]}, "unknown norm"),
    ],
)
def test_bad_values_name_the_choices(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CompareConfig(**kwargs)


def test_words_for_the_new_values():
    assert variant_words("stride", "4") == "overlapping windows every 4 px"
    assert variant_words("lr", 0.003) == "lr 0.003" and variant_words("warmup", 0) == "no warmup"
    assert variant_words("warmup", 2.0) == "2 warmup epochs" and variant_words("mask", "causal") == "a causal mask"
    assert variant_words("position", "rope") == "rotary positions"


def test_a_diverged_run_scores_a_constant_guess():
    splits = load_dataset("digits", rows=100)
    plan = plan_compare(CompareConfig(rows=[100], patches=[4], augment=["none"]), {**GREY28, "img_size": (8, 8)})
    run = next(r for r in plan.runs if r.kind == "vit")
    record = diverged_record(run, splits, 1.5)
    guess = int(torch.bincount(splits.val.labels).argmax())
    assert record.diverged and record.seconds == 1.5 and record.val_ece is None
    assert record.best_val_acc == pytest.approx(float((splits.val.labels == guess).float().mean()))
    assert record.final_val_acc == record.best_val_acc and record.params == run.params


@pytest.mark.slow
def test_a_study_with_a_diverged_run_permutation_and_both_train_readings(tmp_path, monkeypatch):
    import vitlab.experiments.execution as execution

    real = execution.train_run

    def diverging(cfg, splits):  # the ViT at lr 0.5 "diverges"; every other run trains
        if cfg.lr == 0.5:
            raise DivergenceError("training diverged: loss nan at epoch 1, batch 1")
        return real(cfg, splits)

    monkeypatch.setattr(execution, "train_run", diverging)
    config = CompareConfig(
        rows=[200],
        patches=[4],
        augment=["none"],
        epochs=2,
        recipe="plain",
        position=["abs", "none"],
        lr=[None, 0.5],
        permute=True,
        train_eval=True,
        out_dir=str(tmp_path / "study"),
    )
    result = run_compare(config)
    runs = json.loads((tmp_path / "study" / "results.json").read_text())["runs"]
    vits = {(r["axes"]["position"], r["axes"]["lr"]): r for r in runs if r["kind"] == "vit"}
    assert vits["abs", 0.5]["diverged"] and vits["none", 0.5]["diverged"] and not vits["abs", None]["diverged"]
    assert vits["abs", 0.5]["val_ece"] is None and result.records[vits["abs", 0.5]["key"]].diverged
    # without positions the trained ViT cannot tell shuffled patches: agreement 1; with them it can
    assert vits["none", None]["permuted_agreement"] == 1.0 == vits["none", None]["unpositioned_agreement"]
    assert vits["abs", None]["permuted_agreement"] < 1.0 and vits["abs", None]["unpositioned_agreement"] == 1.0
    assert all(0 <= r["train_eval_acc"] <= 1 for r in runs if not r["diverged"])
    assert "## Diverged runs" in (tmp_path / "study" / "report.md").read_text()


@pytest.mark.slow
def test_cli_takes_the_pitfall_flags(tmp_path, capsys):
    out = tmp_path / "study"
    flags = ["--rows", "100", "--patches", "4", "--augment", "none", "--epochs", "1", "--jobs", "1", "--quiet"]
    axes = ["--block", "prenorm,postnorm", "--norm", "batchnorm", "--mask", "causal", "--stride", "2", "--lr", "1e-3"]
    assert main(["compare", *flags, *axes, "--warmup", "0", "--out", str(out)]) == 0, capsys.readouterr().err
    vits = [r for r in json.loads((out / "results.json").read_text())["runs"] if r["kind"] == "vit"]
    assert sorted(r["axes"]["block"] for r in vits) == ["postnorm", "prenorm"]
    assert all(r["axes"]["norm"] == "batchnorm" and r["axes"]["mask"] == "causal" for r in vits)
    # 8x8 digits in 4x4 windows every 2 px: 3 x 3 tokens, the position table 9 x 64
    tiled = count_params(build_registered("vit-digits", num_classes=10, in_chans=1, img_size=8, patch_size=4))
    assert all(r["params"] == tiled + (9 - 4) * 64 for r in vits)
    assert "post-norm blocks" in (out / "report.md").read_text()
