"""``vitlab explain`` on a checkpoint in a run folder: one example, image files, then the audit."""

import json

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import normalize
from vitlab.explain import explain_checkpoint
from vitlab.explain.record import attention_weights
from vitlab.explain.report import file_examples
from vitlab.explain.request import ExplainRequest
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint
from vitlab.tasks.classify import classify_files


@pytest.fixture(scope="module")
def run_folder(digits_run, tmp_path_factory):
    """A run folder as `vitlab train --out` leaves it: config.json and best/model.safetensors."""
    folder = tmp_path_factory.mktemp("run")
    splits, config = digits_run.splits, digits_run.config
    (folder / "config.json").write_text(json.dumps(config.to_dict()))
    save_checkpoint(
        digits_run.model,
        folder / "best" / "model.safetensors",
        "classifier",
        DataConfig.from_splits(splits),
        name=config.model,
        provenance={"epoch": config.epochs},
    )
    return folder


def test_explain_one_example(run_folder, tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["explain", str(run_folder), "--index", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "val #3" in printed and "last-layer head spreads" in printed
    report = json.loads((out / "explain.json").read_text())
    assert set(report["maps"]) == {"attention", "rollout", "gradient", "gradxinput", "occlusion"}
    for summary in report["maps"].values():
        grid = summary["grid"]
        assert len(grid) == 4 and all(len(row) == 4 for row in grid)
        r, c = summary["top_patch"]
        assert grid[r][c] == summary["max"] == max(max(row) for row in grid)
    assert len(report["heads"]["spread"]) == 2 and len(report["heads"]["spread"][0]) == 2
    assert sum(report["probabilities"]) == pytest.approx(1, abs=1e-5)
    assert all((out / name).is_file() for name in ("maps.png", "heads.png", "explain.json"))


def test_explain_one_method_and_textbook(run_folder, tmp_path):
    out = tmp_path / "grad"
    assert main(["explain", str(run_folder), "--method", "gradient", "--textbook", "--out", str(out)]) == 0
    report = json.loads((out / "explain.json").read_text())
    assert list(report["maps"]) == ["gradient"] and "heads" not in report
    assert (out / "positions.png").is_file() and (out / "temperature.png").is_file()


@pytest.mark.slow
def test_explain_audit(run_folder, tmp_path, capsys):
    out = tmp_path / "audit"
    assert (
        main(["explain", str(run_folder), "--audit", "--samples", "20", "--sanity-epochs", "1", "--out", str(out)]) == 0
    )
    assert "| occlusion |" in capsys.readouterr().out
    saved = json.loads((out / "audit.json").read_text())
    assert saved["samples"] == 20 and saved["sanity_epochs"] == 1
    assert all(row["permuted_rho"] is not None for row in saved["methods"])
    assert (out / "audit.md").is_file() and (out / "curves.png").is_file()


def test_explain_errors_name_the_way_out(run_folder, tmp_path, capsys):
    assert main(["explain", str(run_folder), "--index", "100000", "--out", str(tmp_path)]) == 2
    assert "use 0.." in capsys.readouterr().err
    assert main(["explain", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2


def test_explain_attention_from_a_chosen_patch(run_folder, digits_run, tmp_path):
    out = tmp_path / "query"
    assert (
        main(["explain", str(run_folder), "--method", "attention", "--query", "5", "--index", "7", "--out", str(out)])
        == 0
    )
    report = json.loads((out / "explain.json").read_text())
    assert report["query"] == 5
    splits = digits_run.splits
    inputs = normalize(splits.val.images[7:8], splits.mean, splits.std)
    _, weights = attention_weights(digits_run.model, inputs)
    expected = weights[-1][0, :, 5].mean(0).reshape(4, 4)  # mean-pooled: no prefix tokens
    torch.testing.assert_close(torch.tensor(report["maps"]["attention"]["grid"]), expected)
    assert main(["explain", str(run_folder), "--query", "cls", "--out", str(tmp_path)]) == 2


@pytest.fixture(scope="module")
def photos(digits_run, tmp_path_factory):
    """Two unlabelled image files of validation digits, larger than the model's 8x8 and in other modes: a
    grey PNG and an RGB JPEG (each resized and converted by the checkpoint's preprocessing)."""
    folder = tmp_path_factory.mktemp("photos")
    pixels = (digits_run.splits.val.images[:2, 0] * 255).round().to(torch.uint8).numpy()
    Image.fromarray(pixels[0], "L").resize((24, 24), Image.NEAREST).save(folder / "three.png")
    Image.fromarray(pixels[1], "L").convert("RGB").resize((20, 20), Image.BILINEAR).save(folder / "other.jpg")
    return folder


def test_explain_an_image_file(run_folder, photos, tmp_path, capsys):
    out = tmp_path / "photo"
    assert main(["explain", str(run_folder), str(photos / "three.png"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "explain.json").read_text())
    expected = classify_files(load_checkpoint(run_folder, "cpu"), [photos / "three.png"], top_k=1)[0].top[0]
    assert report["label"] is None and report["prediction"] == expected[0]
    assert report["confidence"] == pytest.approx(expected[1], abs=1e-5)
    assert f"three.png: → {expected[0]} (confidence" in printed and "val #" not in printed
    assert set(report["maps"]) == {"attention", "rollout", "gradient", "gradxinput", "occlusion"}
    assert all(len(s["grid"]) == 4 for s in report["maps"].values())
    assert all((out / name).is_file() for name in ("maps.png", "heads.png", "explain.json"))


def test_explain_a_folder_of_images_writes_one_folder_each(run_folder, photos, tmp_path, capsys):
    out = tmp_path / "photos"
    assert main(["explain", str(run_folder), str(photos), "--method", "gradient", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "other.jpg: → " in printed and "three.png: → " in printed
    for folder in ("0_other", "1_three"):
        report = json.loads((out / folder / "explain.json").read_text())
        assert list(report["maps"]) == ["gradient"] and (out / folder / "maps.png").is_file()


def test_an_image_file_is_fed_as_evaluate_feeds_it(run_folder, photos, tmp_path):
    loaded = load_checkpoint(run_folder, "cpu")
    data, path = loaded.data, photos / "other.jpg"
    expected = data.eval_transform()(data.load_image(path))[None]
    seen: list[torch.Tensor] = []
    loaded.model.register_forward_pre_hook(lambda module, args: seen.append(args[0].detach().clone()))
    request = ExplainRequest(out=tmp_path / "hooked", images=[path], method="attention")
    explain_checkpoint(loaded, request)
    assert seen and all(torch.equal(x, expected) for x in seen)
    drawn = file_examples(loaded, request)[0].image  # the picture under the maps is the one the model sees
    assert 0 <= drawn.min() and drawn.max() <= 1
    torch.testing.assert_close(data.normalize(drawn)[None], expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda d: d / "missing.png", "no such file"),
        (lambda d: (d / "notes.png").write_text("not an image") and d / "notes.png", "notes.png"),
        (lambda d: (d / "empty").mkdir() or d / "empty", "holds no image files"),
    ],
    ids=["missing", "not-an-image", "empty-folder"],
)
def test_explain_refuses_a_bad_image_in_one_line(run_folder, tmp_path, capsys, make, message):
    out = tmp_path / "out"
    assert main(["explain", str(run_folder), str(make(tmp_path)), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err and "Traceback" not in err
    assert not out.exists()


def test_explain_refuses_an_image_with_the_audit(run_folder, photos, tmp_path, capsys):
    assert main(["explain", str(run_folder), str(photos / "three.png"), "--audit", "--out", str(tmp_path)]) == 2
    assert "drop the IMAGE arguments" in capsys.readouterr().err


@pytest.mark.parametrize("picked", [["--split", "test"], ["--index", "3"], ["--split", "val", "--index", "0"]])
def test_explain_refuses_a_dataset_pick_beside_image_files(run_folder, photos, tmp_path, capsys, picked):
    """--split/--index choose an image of the dataset: with IMAGE files they would be ignored, so they are refused."""
    assert main(["explain", str(run_folder), str(photos / "three.png"), *picked, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert picked[0] in err and "IMAGE" in err and "\n" not in err
    assert not (tmp_path / "o").exists()
