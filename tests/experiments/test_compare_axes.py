"""``compare``'s position, stem and pooling axes, sparse attention, skipped combinations and the
robustness table."""

import json
from itertools import product

import pytest

from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.experiments import CompareConfig, plan_compare, run_compare
from vitlab.experiments.axes import variant_words
from vitlab.experiments.variants import skip_reason, vit_overrides, with_tome
from vitlab.models import build_registered, count_params

DIGITS = {"num_classes": 10, "in_chans": 1, "img_size": (8, 8)}
ONE_CELL = dict(rows=[50], augment=["none"])


def vits_by(plan, axis):
    return {r.axes[axis]: r for r in plan.runs if r.kind == "vit"}


@pytest.mark.parametrize(
    "axis,values,expected",
    [
        (
            "position",
            ["abs", "rel", "rel-shared", "none"],
            {
                "abs": {},
                "rel": {"pos_embed": "none", "rel_pos": "per_block"},
                "rel-shared": {"pos_embed": "none", "rel_pos": "shared"},
                "none": {"pos_embed": "none"},
            },
        ),
        (
            "stem",
            ["patch", "conv", "resnet"],
            {"patch": {}, "conv": {"patch_embed": "conv_stem"}, "resnet": {"patch_embed": "resnet_stem"}},
        ),
        (
            "pool",
            ["mean", "token", "max"],
            {"mean": {}, "token": {"pool": "token", "class_token": True}, "max": {"pool": "max"}},
        ),
        ("attention", ["full", "sparse"], {"full": {}, "sparse": {"attention": "sparse"}}),
    ],
)
def test_each_axis_enters_the_plan_with_its_overrides(axis, values, expected):
    plan = plan_compare(CompareConfig(**ONE_CELL, patches=[4], **{axis: values}), DIGITS)
    assert [a.name for a in plan.axes] == ["seed", "rows", "augment", "patch", axis]
    assert plan.axes[-1].only == "vit" and plan.axes[-1].values == tuple(values)
    vits = vits_by(plan, axis)
    assert {v: r.overrides for v, r in vits.items()} == {v: {"patch_size": 4, **o} for v, o in expected.items()}
    for value, run in vits.items():
        assert run.key.endswith(f",{axis}={value}")
        assert run.params == count_params(build_registered("vit-digits", **DIGITS, **run.overrides))
    # the CNN stands for the shared axes only, and each cell's CNN is matched to that cell's ViT
    runs = {r.key: r for r in plan.runs}
    for cell in plan.cells:
        vit, cnn = runs[cell.vit], runs[cell.cnn]
        assert axis not in cnn.axes and cnn.mask_patches == [4] and vit.mask_patches == [4]
        assert abs(cnn.params - vit.params) <= 0.15 * vit.params


def test_an_axis_listing_only_its_default_is_no_axis():
    plan = plan_compare(CompareConfig(**ONE_CELL, position=["abs"], stem=["patch"], pool=["mean"]), DIGITS)
    assert [a.name for a in plan.axes] == ["seed", "rows", "augment", "patch"]
    assert len(plan_compare(CompareConfig(**ONE_CELL, patches=[2], pool=["token"]), DIGITS).axes) == 5


def test_a_stem_that_changes_the_vits_size_gets_a_cnn_of_its_size():
    plan = plan_compare(CompareConfig(**ONE_CELL, patches=[4], stem=["patch", "conv"]), DIGITS)
    vits, runs = vits_by(plan, "stem"), {r.key: r for r in plan.runs}
    assert vits["conv"].params - vits["patch"].params > 20_000  # its convolutions
    cnns = {cell.axes["stem"]: runs[cell.cnn] for cell in plan.cells}
    assert cnns["conv"].overrides != cnns["patch"].overrides
    assert all(abs(cnns[s].params - vits[s].params) <= 0.15 * vits[s].params for s in vits)


def test_words_for_labels_and_tables():
    assert variant_words("pool", "token") == "class-token pooling"
    assert variant_words("stem", "resnet") == "ResNet stem"
    assert variant_words("position", "rel") == "a relative position bias per block"
    assert variant_words("attention", "sparse") == "sparse attention"


def test_combinations_that_cannot_be_built_are_skipped_with_the_reason():
    config = CompareConfig(**ONE_CELL, patches=[2, 4], stem=["patch", "resnet"], pool=["mean", "token"])
    plan = plan_compare(config, DIGITS)
    assert {(c.axes["patch"], c.axes["stem"]) for c in plan.cells} == {(2, "patch"), (4, "patch"), (4, "resnet")}
    assert [s["axes"] for s in plan.skipped] == [
        {"patch": 2, "stem": "resnet", "pool": "mean"},
        {"patch": 2, "stem": "resnet", "pool": "token"},
    ]
    assert "multiple of 4, not 2" in plan.skipped[0]["reason"]
    # the patchify ViTs' CNN meets both patch grids; the ResNet-stem ViT, larger, has its own
    assert sorted(r.mask_patches for r in plan.runs if r.kind == "cnn") == [[2, 4], [4]]
    with pytest.raises(ConfigError, match=r"every combination of the study is skipped \(patch 2, stem resnet: the"):
        plan_compare(CompareConfig(**ONE_CELL, patches=[2], stem=["resnet"]), DIGITS)


AXES = {
    "patch": [2, 4],
    "attention": ["full", "window", "linear", "sparse", "tome"],
    "pretrain": ["none", "mae", "dino"],
    "distill": ["none", "cnn"],
    "position": ["abs", "rel"],
    "stem": ["conv", "resnet"],
    "pool": ["mean", "token"],
}


def test_a_combination_is_skipped_exactly_when_it_cannot_be_built_or_trained():
    config = CompareConfig(**ONE_CELL)
    skipped = 0
    for combo in product(*AXES.values()):
        values = dict(zip(AXES, combo))
        if values["attention"] == "window" and values["pretrain"] != "none":
            continue  # CompareConfig refuses the whole study (see test_compare.test_bad_config)
        reason = skip_reason(config, DIGITS, values)
        try:
            model = build_registered(
                "vit-digits",
                **DIGITS,
                **vit_overrides(config, DIGITS, values),
                distill_token=values["distill"] == "cnn",
            )
            if values["attention"] == "tome":
                with_tome(model, (8, 8))
            if values["pretrain"] == "mae":
                model.check_keep()  # MAE runs the encoder on the visible patches only
            buildable = model.config.pool == values["pool"]  # as asked (window attention cannot read a token)
            buildable &= values["pretrain"] != "dino" or model.config.rel_pos == "none"  # DINO: other crop sizes
        except ConfigError:
            buildable = False
        assert (reason is None) == buildable, (values, reason)
        skipped += reason is not None
    assert 0 < skipped < len(list(product(*AXES.values())))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"stem": ["patch", "vit"]}, r"unknown stem value\(s\) \['vit'\]: choose from \('patch', 'conv', 'resnet'\)"),
        ({"pool": ["cls"]}, "unknown pool value"),
        ({"position": ["absolute"]}, "unknown position value"),
        ({"mask_fractions": [0.5, 1.0]}, r"mask_fractions are shares of the patches .* \[0, 1\)"),
        ({"crop_fractions": [0.0]}, r"crop_fractions .* \(0, 1\]"),
        ({"mask_fractions": [0.5, 0.5]}, "mask_fractions repeats"),
    ],
)
def test_bad_values_name_the_choices(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        CompareConfig(**kwargs)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--stem", "vit"], "unknown stem value(s) ['vit']"),
        (["--pool", "token,cls"], "unknown pool value(s) ['cls']"),
        (["--set", "mask_fractions=[2]"], "mask_fractions are shares"),
        (["--set", "robust=true"], "unknown CompareConfig option(s) ['robust']"),
    ],
)
def test_cli_refuses_bad_axis_values_in_one_line(tmp_path, capsys, flags, message):
    assert main(["compare", "--epochs", "1", "--out", str(tmp_path / "study"), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and message in captured.err and len(captured.err.strip().splitlines()) == 1
    assert not (tmp_path / "study").exists()


@pytest.mark.slow
def test_robustness_at_zero_masking_is_the_test_accuracy_and_the_report_tables_it(tmp_path):
    config = CompareConfig(
        rows=[40],
        patches=[2, 4],
        augment=["none"],
        epochs=1,
        seeds=2,
        device="cpu",
        out_dir=str(tmp_path),
        pool=["mean", "token"],
        stem=["patch", "resnet"],
        robustness=True,
        mask_fractions=[0.0, 0.5],
    )
    result = run_compare(config)
    for record in result.records.values():
        met = {c.axes["patch"] for c in result.plan.cells if record.key in (c.vit, c.cnn)}
        assert sorted(e["patch"] for e in record.robustness) == sorted(met)
        for entry in record.robustness:
            assert entry["clean"] == entry["zero_0"] == record.test_acc
            assert (entry["drop_0"] == record.test_acc) if record.kind == "vit" else entry["drop_0"] is None
            assert 0 <= entry["zero_0.5"] <= 1 and 0 <= entry["crop_0.75"] <= 1
    report = (tmp_path / "report.md").read_text()
    assert "## Robustness: masked patches and centre crops" in report
    assert "| Stem | Pool | Clean | Drop 0% | Zero 0% | Drop 50% | Zero 50% | Crop 75% |" in report
    assert "## Skipped combinations" in report and "- patch 2, stem resnet (2 combinations): the ResNet stem" in report
    assert "Under dropping 50% of the patch tokens, the ViT with class-token pooling changes by" in report
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results["skipped"]) == 2
    assert "ViT patch 4, ResNet stem, class-token pooling" in {r["label"] for r in results["runs"]}
    assert all(a["seeds"] == 2 and a["robustness"][0]["std"]["clean"] is not None for a in results["aggregates"])


@pytest.mark.slow
def test_cli_flags_and_set_reach_the_study(tmp_path, capsys):
    out = tmp_path / "cli"
    flags = ["--rows", "30", "--patches", "2", "--augment", "none", "--epochs", "1", "--jobs", "1", "--quiet"]
    axes = ["--pool", "mean,token", "--stem", "patch,resnet", "--robustness", "--set", "crop_fractions=[0.5]"]
    assert main(["compare", *flags, *axes, "--out", str(out)]) == 0
    assert "skipped patch 2, stem resnet (2 combinations): the ResNet stem" in capsys.readouterr().err
    config = json.loads((out / "results.json").read_text())["config"]
    assert (config["pool"], config["stem"], config["robustness"], config["crop_fractions"]) == (
        ["mean", "token"],
        ["patch", "resnet"],
        True,
        [0.5],
    )
    assert "| Zero 50% | Crop 50% |" in (out / "report.md").read_text()
