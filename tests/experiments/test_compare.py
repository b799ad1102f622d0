"""``run_compare``: grid expansion, CNN sizing, bad input, and a tiny end-to-end study."""
import json
import statistics
from itertools import product

import pytest

from vitlab.cli.main import main
from vitlab.experiments import CompareConfig, plan_compare, run_compare
from vitlab.experiments.compare import train_config
from vitlab.train import TrainConfig
from vitlab.models import count_params, create_model

DIGITS = {"num_classes": 10, "in_chans": 1, "img_size": (8, 8)}
GREY28 = {"num_classes": 10, "in_chans": 1, "img_size": (28, 28)}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_grid_expands_every_combination_and_shares_equal_cnns():
    config = CompareConfig(rows=[50, None], patches=[2, 4], augment=["none", "light"], seeds=2)
    plan = plan_compare(config, DIGITS)
    assert [a.name for a in plan.axes] == ["seed", "rows", "augment", "patch"]
    expected = set(product(range(2), [50, None], ["none", "light"], [2, 4]))
    assert {tuple(c.axes.values()) for c in plan.cells} == expected
    assert len(plan.cells) == 16
    vits = [r for r in plan.runs if r.kind == "vit"]
    cnns = [r for r in plan.runs if r.kind == "cnn"]
    # vit-digits has the same parameter count at patches 2 and 4, so one CNN serves both
    assert len(vits) == 16 and len(cnns) == 8
    keys = {r.key for r in plan.runs}
    assert all(c.vit in keys and c.cnn in keys for c in plan.cells)
    assert all(r.overrides == {"patch_size": r.axes["patch"]} for r in vits)
    assert all("patch" not in r.axes and r.train == {"seed": r.axes["seed"], "rows": r.axes["rows"],
                                                     "augment": r.axes["augment"]} for r in cnns)


def test_recipe_augment_keeps_the_recipes_own_augmentation():
    config = CompareConfig(rows=[50], patches=[4], augment=["none", "recipe", "light"], epochs=3, recipe="default")
    plan = plan_compare(config, DIGITS)
    by_augment = {r.axes["augment"]: train_config(config, r) for r in plan.runs if r.kind == "vit"}
    assert by_augment["recipe"].augment == TrainConfig().augment
    assert (by_augment["none"].augment, by_augment["light"].augment) == ("none", "light")
    for tc in by_augment.values():
        assert (tc.rows, tc.seed, tc.epochs, tc.model_overrides, tc.recipe) == (50, 0, 3, {"patch_size": 4}, "default")


def test_patches_with_different_budgets_get_their_own_cnn():
    config = CompareConfig(dataset="mnist", rows=[100], patches=[7, 14], augment=["none"])
    assert (config.vit, config.cnn) == ("vit-seed", "cnn-seed")
    plan = plan_compare(config, GREY28)
    cnns = {r.key: r for r in plan.runs if r.kind == "cnn"}
    assert len(cnns) == 2
    widths = {tuple(r.overrides["widths"]) for r in cnns.values()}
    assert len(widths) == 2


@pytest.mark.parametrize("vit,shape,patches", [("vit-digits", DIGITS, [1, 2, 4, 8]), ("vit-seed", GREY28, [4, 7, 14])])
def test_cnn_matches_vit_within_tolerance(vit, shape, patches):
    config = CompareConfig(vit=vit, cnn="cnn-seed", rows=[10], patches=patches, augment=["none"])
    plan = plan_compare(config, shape)
    runs = {r.key: r for r in plan.runs}
    for cell in plan.cells:
        v, c = runs[cell.vit], runs[cell.cnn]
        assert v.params == count_params(create_model(vit, **shape, patch_size=cell.axes["patch"]))
        assert c.params == count_params(create_model("cnn-seed", **shape, widths=c.overrides["widths"]))
        assert abs(c.params - v.params) <= 0.15 * v.params


def test_cnn_outside_tolerance_is_an_error():
    config = CompareConfig(rows=[10], patches=[2], augment=["none"], param_tolerance=1e-4)
    with pytest.raises(ValueError, match=r"parameters against the ViT's .* more than ±"):
        plan_compare(config, DIGITS)


def test_patch_not_dividing_the_image_names_the_fix():
    config = CompareConfig(rows=[10], patches=[2, 3], augment=["none"])
    with pytest.raises(ValueError, match=r"patch 3 .*not divisible by patch 3.*choose a patch that divides it"):
        plan_compare(config, DIGITS)
    with pytest.raises(ValueError, match="patch 3"):        # before any training
        run_compare(config)


@pytest.mark.parametrize("kwargs,match", [
    ({"augment": ["none", "heavy"]}, "unknown augment preset"),
    ({"rows": [0]}, "rows must be positive"),
    ({"patches": []}, "patches is empty"),
    ({"rows": [100, 100]}, "rows repeats"),
    ({"seeds": 0}, "seeds and epochs"),
    ({"vit": "cnn-digits"}, "not a VIT"),
    ({"recipe": "fast"}, "unknown recipe"),
])
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        CompareConfig(**kwargs)


def test_rows_beyond_the_pool_fail_before_training():
    with pytest.raises(ValueError, match="exceed the digits training pool"):
        run_compare(CompareConfig(rows=[100_000], patches=[4], augment=["none"]))


def test_tiny_study_end_to_end(tmp_path):
    out = tmp_path / "study"
    config = CompareConfig(rows=[40, 80], patches=[2, 4], augment=["none"], seeds=2, epochs=1, out_dir=str(out),
                           device="cpu")
    calls = []
    result = run_compare(config, progress=lambda i, n, run, record: calls.append((i, n, record is None)))
    assert len(result.records) == 12                        # 8 ViT runs + 4 CNN runs (shared by both patches)
    assert calls[:2] == [(1, 12, True), (1, 12, False)] and len(calls) == 24

    for record in result.records.values():
        assert record.train_rows == record.axes["rows"]
        assert record.gap == pytest.approx(record.final_train_acc - record.best_val_acc)
        assert record.best_val_acc == max(record.curves["val_acc"])
        assert len(record.curves["val_acc"]) == 1 and record.test_acc is not None

    for name in ("accuracy_vs_rows", "learning_curves", "gap"):
        data = (out / f"{name}.png").read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 1000
    results = json.loads((out / "results.json").read_text())
    assert len(results["runs"]) == 12 and results["config"]["seeds"] == 2
    assert len(results["aggregates"]) == 6                   # (2 ViT patches + 1 CNN) x 2 rows, seeds pooled
    assert all(a["seeds"] == 2 and a["std"]["best_val_acc"] is not None for a in results["aggregates"])

    # each lead and spread recomputed from the runs, paired by seed
    runs = {r["key"]: r for r in results["runs"]}
    assert len(results["leads"]) == 4
    for lead in results["leads"]:
        cells = [c for c in result.plan.cells
                 if {k: v for k, v in c.axes.items() if k != "seed"} == lead["axes"]]
        diffs = [runs[c.vit]["best_val_acc"] - runs[c.cnn]["best_val_acc"] for c in cells]
        assert lead["lead"] == pytest.approx(statistics.fmean(diffs))
        assert lead["spread"] == pytest.approx(statistics.stdev(diffs))
        assert lead["leader"] == ("ViT" if lead["lead"] > 0 else "CNN" if lead["lead"] < 0 else "tie")
    assert len(results["conclusions"]) > len(results["leads"])
    assert [c["patch"] for c in results["token_cost"]] == [2, 4]
    assert [c["tokens"] for c in results["token_cost"]] == [16, 4]

    report = (out / "report.md").read_text()
    assert ("| Model | Rows | Parameters | Best val accuracy | Final train accuracy | Seconds | Patch | Augment | Gap "
            "| ECE | Test accuracy |") in report
    assert " ± " in report
    for sentence in results["conclusions"]:
        assert sentence in report
    for png in ("accuracy_vs_rows.png", "learning_curves.png", "gap.png"):
        assert f"]({png})" in report

    # per-head attention figures of the best ViT run (issue #4): real PNGs, referenced in the report
    best = max((r for r in result.records.values() if r.kind == "vit"), key=lambda r: r.best_val_acc)
    assert results["attention"]["run"] == best.key
    figures = results["attention"]["files"]
    assert figures and all(f.startswith("attention/attention_") for f in figures)
    for f in figures:
        assert (out / f).read_bytes()[:8] == PNG_MAGIC
        assert f"]({f})" in report


def test_cli_runs_a_study_and_reports_errors(tmp_path, capsys):
    code = main(["compare", "--rows", "30", "--patches", "4", "--augment", "none", "--epochs", "1",
                 "--device", "cpu", "--threads", "1", "--out", str(tmp_path), "--name", "cli"])
    captured = capsys.readouterr()
    assert code == 0
    assert "[2/2] cnn-digits widths=" in captured.out and "| Model | Rows | Parameters |" in captured.out
    assert (tmp_path / "cli" / "report.md").is_file()
    assert str(tmp_path / "cli" / "report.md") in captured.err

    assert main(["compare", "--patches", "3", "--epochs", "1", "--out", str(tmp_path), "--name", "bad"]) == 2
    assert "not divisible by patch 3" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()
