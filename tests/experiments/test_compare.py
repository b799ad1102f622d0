"""``run_compare``: grid expansion, CNN sizing, bad input, and a tiny end-to-end study."""

import json
import statistics
from itertools import product

import pytest
import torch

from vitlab.cli.main import main
from vitlab.errors import ConfigError, DataError
from vitlab.experiments import CompareConfig, LocalExecutor, plan_compare, run_compare
from vitlab.experiments.execution import run_groups, train_config
from vitlab.experiments.report import results_numbers
from vitlab.experiments.training import TrainConfig
from vitlab.experiments.variants import attention_overrides, tome_schedule
from vitlab.models import build_registered, count_params, get_config

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
    assert all(
        "patch" not in r.axes
        and r.train == {"seed": r.axes["seed"], "rows": r.axes["rows"], "augment": r.axes["augment"]}
        for r in cnns
    )


def test_variant_axes_join_the_grid_only_when_studied():
    assert [a.name for a in plan_compare(CompareConfig(attention=["full"], pretrain=["none"]), DIGITS).axes] == [
        "seed",
        "rows",
        "augment",
        "patch",
    ]
    config = CompareConfig(rows=[50], patches=[2], augment=["none"], attention=["full", "window", "tome"])
    plan = plan_compare(config, DIGITS)
    assert [a.name for a in plan.axes][-1] == "attention"
    vits = {r.axes["attention"]: r for r in plan.runs if r.kind == "vit"}
    # 8x8 digits in 2x2 patches: a 4x4 grid, windows of 2x2; tome trains the full model as registered
    assert vits["window"].overrides == {"patch_size": 2, "attention": "window", "window_size": 2}
    assert vits["full"].overrides == vits["tome"].overrides == {"patch_size": 2}
    assert len([r for r in plan.runs if r.kind == "cnn"]) == 1  # the same budget within the CNN family's steps


def test_attention_overrides_fit_the_patch_grid():
    tiny = get_config("vit-tiny-patch16-224")  # class token, 14x14 grid, 196 tokens
    assert attention_overrides("window", tiny) == {
        "attention": "window",
        "window_size": 7,
        "class_token": False,
        "reg_tokens": 0,
        "pool": "mean",
    }
    assert attention_overrides("lowrank", tiny) == {"attention": "lowrank", "lowrank_k": 98}
    assert attention_overrides("latent", tiny) == {"attention": "latent", "num_latents": 49}
    assert attention_overrides("linear", tiny) == {"attention": "linear"}
    assert attention_overrides("full", tiny) == attention_overrides("tome", tiny) == {}
    for kind in ("window", "lowrank", "latent", "linear", "lsa"):
        build_registered("vit-tiny-patch16-224", depth=2, **attention_overrides(kind, tiny))  # a valid model each
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
        assert v.params == count_params(build_registered(vit, **shape, patch_size=cell.axes["patch"]))
        assert c.params == count_params(build_registered("cnn-seed", **shape, widths=c.overrides["widths"]))
        assert abs(c.params - v.params) <= 0.15 * v.params


def test_cnn_outside_tolerance_is_an_error():
    config = CompareConfig(rows=[10], patches=[2], augment=["none"], param_tolerance=1e-4)
    with pytest.raises(ValueError, match=r"parameters against the ViT's .* more than ±"):
        plan_compare(config, DIGITS)


def test_patch_not_dividing_the_image_names_the_fix():
    config = CompareConfig(rows=[10], patches=[2, 3], augment=["none"])
    with pytest.raises(ValueError, match=r"patch 3 .*not divisible by patch 3.*choose a patch that divides it.*--pad"):
        plan_compare(config, DIGITS)
    with pytest.raises(ValueError, match="patch 3"):  # before any training
        run_compare(config)


def test_pad_makes_the_mini_projects_patches_runnable():
    config = CompareConfig(dataset="mnist", rows=[100], patches=[4, 7, 8, 16], augment=["none"], pad=True)
    vits = {r.axes["patch"]: r for r in plan_compare(config, GREY28).runs if r.kind == "vit"}
    # only the patches that do not divide 28 pad; 8 and 16 pad 28 to 32: a 4x4 and a 2x2 grid
    assert [vits[p].overrides for p in (4, 7)] == [{"patch_size": 4}, {"patch_size": 7}]
    assert vits[8].overrides == vits[16].overrides | {"patch_size": 8} == {"patch_size": 8, "pad": True}
    model = build_registered("vit-seed", **GREY28, **vits[16].overrides)
    assert model.grid_size(28, 28) == (2, 2) and model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)
    assert vits[8].params == count_params(build_registered("vit-seed", **GREY28, **vits[8].overrides))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"augment": ["none", "heavy"]}, "unknown augment preset"),
        ({"rows": [0]}, "rows must be positive"),
        ({"patches": []}, "patches is empty"),
        ({"rows": [100, 100]}, "rows repeats"),
        ({"seeds": 0}, "seeds and epochs"),
        ({"vit": "cnn-digits"}, "not a VIT"),
        ({"recipe": "fast"}, "unknown recipe"),
        ({"attention": ["full", "dense"]}, "unknown attention value"),
        ({"pretrain": ["none", "byol"]}, "unknown pretrain value"),
        ({"distill": ["vit"]}, "unknown distill value"),
        ({"attention": ["window", "window"]}, "attention repeats"),
        ({"distill_kind": "medium"}, "distill_kind must be"),
        ({"pretrain_images": "val"}, "pretrain_images must be"),
        ({"cnns": ["matched", "resnet"]}, "unknown cnns value"),
        ({"normalization": "minmax"}, "normalization must be one of"),
        ({"preset": "imagenet"}, "unknown preset"),
        ({"attention": ["full", "window"], "pretrain": ["none", "mae"]}, "window attention, built for the whole"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CompareConfig(**kwargs)


def test_an_output_folder_under_a_file_fails_before_training(tmp_path):
    blocker = tmp_path / "results.txt"
    blocker.write_text("not a folder")
    calls = []
    with pytest.raises(DataError, match="results.txt is a file, not a folder"):
        run_compare(
            CompareConfig(rows=[30], patches=[4], augment=["none"], epochs=1, out_dir=str(blocker / "study")),
            progress=lambda *args: calls.append(args),
        )
    assert calls == [] and blocker.read_text() == "not a folder"


def test_textbook_preset_plans_the_vit_against_both_cnns():
    config = CompareConfig.from_preset("textbook", seeds=2)
    assert (
        config.name,
        config.dataset,
        config.rows,
        config.patches,
        config.epochs,
        config.recipe,
        config.vit,
        config.normalization,
        config.preset,
    ) == ("textbook", "fashion-mnist", [1000, 4000], [7], 15, "plain", "vit-seed", "unit", "textbook")
    plan = plan_compare(config, GREY28)
    assert [a.name for a in plan.axes] == ["seed", "rows", "augment", "patch", "cnn"]
    assert len(plan.cells) == 2 * 2 * 2 and len(plan.runs) == 2 * 2 * 3  # each ViT trained once, met twice
    runs = {r.key: r for r in plan.runs}
    for cell in plan.cells:
        vit, cnn = runs[cell.vit], runs[cell.cnn]
        assert "cnn" not in vit.axes and cnn.axes["cnn"] == cell.axes["cnn"]
        assert vit.train == cnn.train == {"seed": cell.axes["seed"], "rows": cell.axes["rows"], "augment": "none"}
        if cell.axes["cnn"] == "textbook":  # the textbook's size: ~60k parameters, no BatchNorm
            model = build_registered(cnn.model, **GREY28, **cnn.overrides)
            assert cnn.params == count_params(model) == 60_554
            assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
        else:
            assert abs(cnn.params - vit.params) <= 0.15 * vit.params
    assert train_config(config, runs[plan.cells[0].vit]).lr == 1e-3
    assert CompareConfig.from_preset("textbook", name="mine", rows=[300]).name == "mine"
    with pytest.raises(ConfigError, match="unknown preset"):
        CompareConfig.from_preset("imagenet")


def test_runs_that_share_a_teacher_an_encoder_or_a_training_run_together():
    config = CompareConfig(
        rows=[50], patches=[2], augment=["none"], seeds=2, attention=["full", "tome"], distill=["none", "cnn"]
    )
    plan = plan_compare(config, DIGITS)
    groups = run_groups(config, plan)
    assert sorted(r.key for g in groups for r in g) == sorted(r.key for r in plan.runs)
    order = [r.key for r in plan.runs]
    for group in groups:
        assert [order.index(r.key) for r in group] == sorted(order.index(r.key) for r in group)
        assert len({r.train["seed"] for r in group}) == 1  # nothing is shared across seeds
        for run in group:
            assert run.teacher is None or run.teacher in {r.key for r in group}
    # per seed: the CNN, the distilled full and ToMe ViTs (one training) and the undistilled pair
    assert sorted(len(g) for g in groups) == [2, 2, 3, 3]
    pretrained = CompareConfig(rows=[50, 100], patches=[2], augment=["none"], pretrain=["none", "mae"])
    groups = run_groups(pretrained, plan_compare(pretrained, DIGITS))
    assert sorted(len(g) for g in groups) == [1, 1, 1, 1, 2]  # one encoder for both rows


def test_rows_beyond_the_pool_fail_before_training():
    with pytest.raises(ValueError, match="exceed the digits training pool"):
        run_compare(CompareConfig(rows=[100_000], patches=[4], augment=["none"]))


@pytest.mark.slow
def test_tiny_study_end_to_end(tmp_path):
    out = tmp_path / "study"
    config = CompareConfig(
        rows=[40, 80], patches=[2, 4], augment=["none"], seeds=2, epochs=1, out_dir=str(out), device="cpu"
    )
    calls = []
    result = run_compare(config, progress=lambda done, n, run, record: calls.append((done, n, run.key, record.key)))
    assert len(result.records) == 12  # 8 ViT runs + 4 CNN runs (shared by both patches)
    assert [c[:2] for c in calls] == [(i, 12) for i in range(1, 13)] and all(c[2] == c[3] for c in calls)

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
    assert len(results["aggregates"]) == 6  # (2 ViT patches + 1 CNN) x 2 rows, seeds pooled
    assert all(a["seeds"] == 2 and a["std"]["best_val_acc"] is not None for a in results["aggregates"])

    # each lead and spread recomputed from the runs, paired by seed
    runs = {r["key"]: r for r in results["runs"]}
    assert len(results["leads"]) == 4
    for lead in results["leads"]:
        cells = [c for c in result.plan.cells if {k: v for k, v in c.axes.items() if k != "seed"} == lead["axes"]]
        diffs = [runs[c.vit]["best_val_acc"] - runs[c.cnn]["best_val_acc"] for c in cells]
        assert lead["lead"] == pytest.approx(statistics.fmean(diffs))
        assert lead["spread"] == pytest.approx(statistics.stdev(diffs))
        assert lead["leader"] == ("ViT" if lead["lead"] > 0 else "CNN" if lead["lead"] < 0 else "tie")
    assert len(results["conclusions"]) > len(results["leads"])
    assert [c["patch"] for c in results["token_cost"]] == [2, 4]
    assert [c["tokens"] for c in results["token_cost"]] == [16, 4]

    report = (out / "report.md").read_text()
    assert (
        "| Model | Rows | Parameters | Best val accuracy | Final train accuracy | Seconds | Patch | Augment | Gap "
        "| ECE | Test accuracy |"
    ) in report
    assert " ± " in report
    for sentence in results["conclusions"]:
        assert sentence in report
    for png in ("accuracy_vs_rows.png", "learning_curves.png", "gap.png"):
        assert f"]({png})" in report

    # per-head attention figures of the best ViT run: real PNGs, referenced in the report
    best = max((r for r in result.records.values() if r.kind == "vit"), key=lambda r: r.best_val_acc)
    assert results["attention"]["run"] == best.key
    figures = results["attention"]["files"]
    assert figures and all(f.startswith("attention/attention_") for f in figures)
    for f in figures:
        assert (out / f).read_bytes()[:8] == PNG_MAGIC
        assert f"]({f})" in report


@pytest.mark.slow
def test_cli_runs_a_study_and_reports_errors(tmp_path, capsys):
    code = main(
        [
            "compare",
            "--rows",
            "30",
            "--patches",
            "4",
            "--augment",
            "none",
            "--epochs",
            "1",
            "--device",
            "cpu",
            "--jobs",
            "1",
            "--threads",
            "1",
            "--out",
            str(tmp_path / "cli"),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    # one line per finished run, in the order they finish
    lines = [line for line in captured.out.splitlines() if line.startswith("[")]
    assert [line[:5] for line in lines] == ["[1/2]", "[2/2]"]
    assert {line.split()[1] for line in lines} == {"vit-digits", "cnn-digits"}
    assert any(" widths=" in line and "rows=30 augment=none seed=0: val " in line for line in lines)
    assert "| Model | Rows | Parameters |" in captured.out
    assert (tmp_path / "cli" / "report.md").is_file()
    assert str(tmp_path / "cli" / "report.md") in captured.err

    assert main(["compare", "--patches", "3", "--epochs", "1", "--out", str(tmp_path / "bad")]) == 2
    assert "not divisible by patch 3" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()

    # the same study name again is refused, and the first study's report is kept
    report_before = (tmp_path / "cli" / "report.md").read_bytes()
    assert main(["compare", "--rows", "30", "--patches", "4", "--epochs", "1", "--out", str(tmp_path / "cli")]) == 2
    assert "already holds a compare run" in capsys.readouterr().err
    assert (tmp_path / "cli" / "report.md").read_bytes() == report_before


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--out", "FILE/study"], "is a file, so no folder can be made there"),
        (["--threads", "-3"], "threads=-3"),
        (["--jobs", "0"], "jobs=0"),
        (["--executor", "local", "--address", "auto"], "is for the ray executor"),
    ],
)
def test_cli_refuses_bad_execution_settings_in_one_line(tmp_path, capsys, flags, message):
    (tmp_path / "FILE").write_text("")
    flags = [str(tmp_path / f) if f.startswith("FILE") else f for f in flags]
    out = [] if "--out" in flags else ["--out", str(tmp_path / "study")]
    assert main(["compare", "--rows", "30", "--patches", "4", "--augment", "none", "--epochs", "1", *out, *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and len(captured.err.strip().splitlines()) == 1


@pytest.mark.slow
def test_parallel_runs_give_the_numbers_of_serial_runs(tmp_path):
    config = dict(rows=[40], patches=[2, 4], augment=["none"], seeds=2, epochs=1, device="cpu")
    found = {}
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        result = run_compare(CompareConfig(**config, out_dir=str(out)), executor=LocalExecutor(jobs=jobs, threads=1))
        assert result.execution == {"executor": "local", "jobs": jobs, "threads_per_run": 1}
        found[jobs] = json.loads((out / "results.json").read_text())
    assert len(found[1]["runs"]) == 6 and found[2]["environment"]["jobs"] == 2
    assert results_numbers(found[1]) == results_numbers(found[2])
    assert "seconds" in found[1]["runs"][0] and "seconds" not in results_numbers(found[1])["runs"][0]
    assert [r["key"] for r in found[1]["runs"]] == [r["key"] for r in found[2]["runs"]]  # plan order kept


@pytest.mark.slow
def test_attention_study_reports_accuracy_seconds_speed_and_memory(tmp_path):
    config = CompareConfig(
        rows=[60],
        patches=[2],
        augment=["none"],
        epochs=1,
        device="cpu",
        out_dir=str(tmp_path),
        attention=["full", "window", "tome"],
    )
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
    assert results["attention"]["run"] == full.key  # figures come from a full-attention ViT


@pytest.mark.slow
def test_pretrain_and_distill_study(tmp_path):
    config = CompareConfig(
        rows=[60],
        patches=[2],
        augment=["none"],
        epochs=1,
        device="cpu",
        out_dir=str(tmp_path),
        pretrain=["none", "mae"],
        distill=["none", "cnn"],
        pretrain_epochs=1,
    )
    result = run_compare(config)
    vits = {(r.axes["pretrain"], r.axes["distill"]): r for r in result.records.values() if r.kind == "vit"}
    assert set(vits) == set(product(["none", "mae"], ["none", "cnn"]))
    # the distilled ViT carries a distillation token and head
    assert vits["none", "cnn"].params > vits["none", "none"].params
    assert len([r for r in result.records.values() if r.kind == "cnn"]) == 1
    report = (tmp_path / "report.md").read_text()
    assert "MAE pretraining changes the ViT's best validation accuracy by" in report
    assert "Distillation from the CNN changes the ViT's best validation accuracy by" in report
    assert "the training pool (labels unused)" in report  # pretraining sees no validation or test image by default


@pytest.mark.slow
def test_a_studys_own_config_runs_it_again(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    flags = ["--rows", "30", "--patches", "4", "--augment", "none", "--epochs", "1", "--jobs", "1", "--quiet"]
    assert main(["compare", *flags, "--out", str(first)]) == 0
    assert (
        main(["compare", "--config", str(first / "config.json"), "--jobs", "1", "--quiet", "--out", str(second)]) == 0
    )
    runs = [json.loads((f / "results.json").read_text())["runs"] for f in (first, second)]
    assert [r["best_val_acc"] for r in runs[0]] == [r["best_val_acc"] for r in runs[1]]
