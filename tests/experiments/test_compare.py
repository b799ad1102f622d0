"""``run_compare``: grid expansion, CNN sizing, bad input, and a tiny end-to-end study."""
import json
import statistics
from itertools import product

import pytest

from vitlab.cli.main import main
from vitlab.experiments import CompareConfig, plan_compare, run_compare
from vitlab.experiments.compare import attention_overrides, tome_schedule, train_config
from vitlab.models import get_config
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


def test_variant_axes_join_the_grid_only_when_studied():
    assert [a.name for a in plan_compare(CompareConfig(attention=["full"], pretrain=["none"]), DIGITS).axes] == [
        "seed", "rows", "augment", "patch"]
    config = CompareConfig(rows=[50], patches=[2], augment=["none"], attention=["full", "window", "tome"])
    plan = plan_compare(config, DIGITS)
    assert [a.name for a in plan.axes][-1] == "attention"
    vits = {r.axes["attention"]: r for r in plan.runs if r.kind == "vit"}
    # 8x8 digits in 2x2 patches: a 4x4 grid, windows of 2x2; tome trains the full model as registered
    assert vits["window"].overrides == {"patch_size": 2, "attention": "window", "window_size": 2}
    assert vits["full"].overrides == vits["tome"].overrides == {"patch_size": 2}
    assert len([r for r in plan.runs if r.kind == "cnn"]) == 1       # the same budget within the CNN family's steps


def test_attention_overrides_fit_the_patch_grid():
    tiny = get_config("vit-tiny-patch16-224")                      # class token, 14x14 grid, 196 tokens
    assert attention_overrides("window", tiny) == {"attention": "window", "window_size": 7, "class_token": False,
                                                   "reg_tokens": 0, "pool": "mean"}
    assert attention_overrides("lowrank", tiny) == {"attention": "lowrank", "lowrank_k": 98}
    assert attention_overrides("latent", tiny) == {"attention": "latent", "num_latents": 49}
    assert attention_overrides("linear", tiny) == {"attention": "linear"}
    assert attention_overrides("full", tiny) == attention_overrides("tome", tiny) == {}
    for kind in ("window", "lowrank", "latent", "linear", "lsa"):
        create_model("vit-tiny-patch16-224", depth=2, **attention_overrides(kind, tiny))   # a valid model each
    # half the patch tokens merged in all, front-loaded
    assert tome_schedule(196, 12) == [15, 14, 12, 11, 10, 9, 7, 6, 5, 4, 2, 1]
    assert tome_schedule(16, 4) == [3, 2, 2, 1]


def test_distillation_trains_the_cells_cnn_first_as_its_teacher():
    config = CompareConfig(rows=[50], patches=[2], augment=["none"], distill=["none", "cnn"])
    plan = plan_compare(config, DIGITS)
    order = [r.key for r in plan.runs]
    for cell in plan.cells:
        vit = next(r for r in plan.runs if r.key == cell.vit)
        if cell.axes["distill"] == "cnn":
            assert vit.teacher == cell.cnn and order.index(cell.cnn) < order.index(cell.vit)
        else:
            assert vit.teacher is None


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
    ({"attention": ["full", "sparse"]}, "unknown attention value"),
    ({"pretrain": ["none", "byol"]}, "unknown pretrain value"),
    ({"distill": ["vit"]}, "unknown distill value"),
    ({"attention": ["window", "window"]}, "attention repeats"),
    ({"distill_kind": "medium"}, "distill_kind must be"),
    ({"pretrain_images": "val"}, "pretrain_images must be"),
    ({"attention": ["full", "window"], "pretrain": ["none", "mae"]}, "window attention, built for the whole"),
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


def test_attention_study_reports_accuracy_seconds_speed_and_memory(tmp_path):
    config = CompareConfig(rows=[60], patches=[2], augment=["none"], epochs=1, device="cpu", out_dir=str(tmp_path),
                           attention=["full", "window", "tome"])
    result = run_compare(config)
    vits = {r.axes["attention"]: r for r in result.records.values() if r.kind == "vit"}
    assert set(vits) == {"full", "window", "tome"}
    for record in result.records.values():
        assert record.images_per_s > 0 and record.peak_mb > 0
    full, tome = vits["full"], vits["tome"]
    # tome is the full model's own training (not a retrained copy), evaluated with merging
    assert tome.curves == full.curves and tome.seconds == full.seconds and tome.tome_r == [3, 2, 2, 1]
    assert 0 <= tome.agreement <= 1 and full.agreement is None and full.tome_r is None
    assert tome.final_val_acc == tome.best_val_acc and full.final_val_acc == full.curves["val_acc"][-1]
    assert full.label == "ViT patch 2, full attention" and tome.label == "ViT patch 2, full attention + ToMe"
    report = (tmp_path / "report.md").read_text()
    assert "| Attention |" in report and "| Images/s | Peak MB | Agreement |" in report
    assert "## ViT variants" in report and "Window attention changes the ViT's best validation accuracy by" in report
    assert f"keeps {tome.agreement:.1%} of its validation predictions" in report
    results = json.loads((tmp_path / "results.json").read_text())
    assert {r["label"] for r in results["runs"]} >= {full.label, tome.label}
    assert results["attention"]["run"] == full.key                   # figures come from a full-attention ViT


def test_pretrain_and_distill_study(tmp_path):
    config = CompareConfig(rows=[60], patches=[2], augment=["none"], epochs=1, device="cpu", out_dir=str(tmp_path),
                           pretrain=["none", "mae"], distill=["none", "cnn"], pretrain_epochs=1)
    result = run_compare(config)
    vits = {(r.axes["pretrain"], r.axes["distill"]): r for r in result.records.values() if r.kind == "vit"}
    assert set(vits) == set(product(["none", "mae"], ["none", "cnn"]))
    # the distilled ViT carries a distillation token and head
    assert vits["none", "cnn"].params > vits["none", "none"].params
    assert len([r for r in result.records.values() if r.kind == "cnn"]) == 1
    report = (tmp_path / "report.md").read_text()
    assert "MAE pretraining changes the ViT's best validation accuracy by" in report
    assert "Distillation from the CNN changes the ViT's best validation accuracy by" in report
    assert "(validation and test images included, their labels unused)" in report
