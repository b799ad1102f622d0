"""Dense runs on the engine, tiny: train -> run folder -> checkpoint -> evaluate -> predict overlay,
through the CLI too; the flip augmentation; bad settings refused."""

import json

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.errors import CheckpointError, ConfigError
from vitlab.runs import RunDir, load_checkpoint
from vitlab.tasks import EvaluateRequest
from vitlab.tasks import run as run_task
from vitlab.tasks.dense import (
    DenseTrainConfig,
    evaluate_dense_checkpoint,
    predict_file,
)
from vitlab.tasks.dense.train import hflip

TINY = {"embed_dim": 32, "depth": 2, "num_heads": 2, "decoder_width": 16, "num_queries": 6}
SMALL_FLAGS = [
    "--dataset",
    "shapes",
    "--epochs",
    "1",
    "--batch-size",
    "8",
    "--device",
    "cpu",
    "--quiet",
    "--set",
    "count=20",
    "--set",
    "image_size=32",
    "--set",
    "embed_dim=32",
    "--set",
    "depth=1",
    "--set",
    "num_heads=2",
    "--set",
    "warmup_epochs=0",
]


@pytest.mark.slow
@pytest.mark.parametrize(
    "task,head,kind",
    [("segment", "decoder", "segmenter"), ("segment", "queries", "segmenter"), ("detect", "detr", "detector")],
)
def test_run_folder_checkpoint_rebuilds_the_model_and_evaluates_as_in_training(tmp_path, task, head, kind):
    run = tmp_path / "run"
    result = run_task(
        task,
        DenseTrainConfig(
            task=task,
            head=head,
            count=24,
            image_size=32,
            epochs=1,
            batch_size=8,
            warmup_epochs=0.0,
            device="cpu",
            out_dir=str(run),
            model=TINY,
        ),
    )
    assert len(result.history) == 1 and result.checkpoint == run / "last" / "model.safetensors"
    assert {"run.json", "config.json", "metrics.jsonl", "summary.json"} <= {p.name for p in run.iterdir()}
    assert json.loads((run / "run.json").read_text())["kind"] == task
    loaded = load_checkpoint(run)
    assert loaded.kind == kind and loaded.model.config == result.model.config
    assert loaded.data.classes == ["circle", "square", "triangle", "bar"] and loaded.data.image_size == (32, 32)
    images = torch.rand(3, 3, 32, 32)
    with torch.no_grad():
        expected, got = result.model.eval()(images), loaded.model(images)
    for key in ("logits", "masks", "boxes"):
        if key in expected:
            torch.testing.assert_close(got[key], expected[key], rtol=0, atol=0)
    keys = ("pixel_acc", "mean_iou", "boundary_acc") if task == "segment" else ("map", "map50")
    report = evaluate_dense_checkpoint(EvaluateRequest(str(run), device="cpu"))
    assert all(0.0 <= report[k] <= 1.0 for k in keys)
    assert {k: report[k] for k in keys} == {k: result.test[k] for k in keys}  # the run's own test split again
    assert set(result.val) == set(keys) and result.history[-1]["val_" + keys[0]] == result.val[keys[0]]
    Image.new("RGB", (40, 40), (200, 10, 10)).save(tmp_path / "img.png")
    out = predict_file(run, tmp_path / "img.png", tmp_path / "overlay.png", device="cpu")
    assert Image.open(out).size == (128, 128)


@pytest.mark.slow
def test_cli_train_resume_evaluate_predict(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--task", "segment", "--head", "linear", "--out", run, *SMALL_FLAGS]) == 0
    assert "mean IoU" in capsys.readouterr().out
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["count"], config["image_size"], config["warmup_epochs"], config["model"]["depth"]) == (20, 32, 0, 1)
    assert main(["train", "--task", "segment", "--out", run, *SMALL_FLAGS]) == 2  # holds a run already
    assert "already holds a segment run" in capsys.readouterr().err
    assert main(["train", "--task", "segment", "--out", run, "--resume", "--epochs", "2", "--quiet"]) == 2
    assert "epochs (run has 1, given 2)" in capsys.readouterr().err
    assert main(["train", "--task", "segment", "--out", run, "--resume", "--device", "cpu", "--quiet"]) == 0
    assert main(["evaluate", run, "--device", "cpu", "--out", str(tmp_path / "eval")]) == 0
    assert "pixel accuracy" in capsys.readouterr().out
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["task"] == "segment"
    Image.new("RGB", (32, 32)).save(tmp_path / "img.png")
    assert main(["predict", run, str(tmp_path / "img.png"), "--out", str(tmp_path / "o.png"), "--device", "cpu"]) == 0
    assert (tmp_path / "o.png").is_file()
    assert main(["pretrain", "mae", "--out", run, "--epochs", "1", "--device", "cpu"]) == 2  # another kind's folder


def test_evaluate_and_predict_refuse_a_classifier(tmp_path):
    from vitlab.models import build_registered
    from vitlab.runs import DataConfig, save_checkpoint

    path = save_checkpoint(
        build_registered("vit-digits", depth=1),
        tmp_path / "cls.safetensors",
        "classifier",
        DataConfig((8, 8), 1, (0.5,), (0.5,)),
    )
    Image.new("RGB", (8, 8)).save(tmp_path / "img.png")
    with pytest.raises(CheckpointError, match="classifier checkpoint, not a segmenter or detector"):
        predict_file(path, tmp_path / "img.png", tmp_path / "o.png", device="cpu")
    with pytest.raises(CheckpointError, match="not a segmenter or detector"):
        evaluate_dense_checkpoint(EvaluateRequest(str(path), device="cpu"))


def test_hflip_mirrors_images_masks_and_boxes_together():
    images = torch.zeros(1, 3, 6, 10)
    masks = torch.zeros(1, 6, 10, dtype=torch.long)
    images[0, :, 1:4, 2:6], masks[0, 1:4, 2:6] = 1.0, 2  # a square over columns 2..5
    boxes = [torch.tensor([[2.0, 1.0, 6.0, 4.0]])]  # pixel-edge xyxy
    flipped_images, flipped_masks, flipped_boxes = hflip(images, masks, boxes)
    cols = flipped_masks[0].eq(2).any(0).nonzero().flatten()
    assert flipped_boxes[0].tolist() == [[cols.min().item(), 1.0, cols.max().item() + 1.0, 4.0]]
    assert torch.equal(flipped_images[0, 0].bool(), flipped_masks[0].eq(2))
    again = hflip(flipped_images, flipped_masks, flipped_boxes)
    assert torch.equal(again[0], images) and torch.equal(again[1], masks) and torch.equal(again[2][0], boxes[0])


def test_dense_options_split_into_run_and_model_and_reject_unknown_ones():
    cfg = DenseTrainConfig.from_options({"task": "segment", "head": "decoder", "epochs": 3, "patch_size": 4})
    assert cfg.epochs == 3 and cfg.model == {"patch_size": 4}
    assert DenseTrainConfig.from_options({"task": "detect"}).head == "detr" and DenseTrainConfig().head == "linear"
    assert DenseTrainConfig.from_options({**cfg.to_dict(), "epochs": 5}) == DenseTrainConfig(
        **{**cfg.to_dict(), "epochs": 5}
    )
    assert DenseTrainConfig().device == "auto"
    with pytest.raises(ConfigError, match="unknown dense option"):
        DenseTrainConfig.from_options({"bogus": 1})
    with pytest.raises(ConfigError, match="unknown dense option"):
        DenseTrainConfig.from_options({"num_classes": 3})  # set from the data, not by hand


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"task": "detect", "head": "decoder"}, "does not do detect"),
        ({"task": "classify"}, "task must be"),
        ({"epochs": 0}, "epochs must be"),
        ({"count": 3}, "count must be"),
        ({"batch_size": -1}, "batch_size must be"),
        ({"dataset": "digits"}, "dataset must be"),
        ({"model": {"img_size": 32}}, "unknown dense model option"),
        ({"lr": 0.0}, "lr must be"),
    ],
)
def test_bad_dense_settings_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        DenseTrainConfig(**fields)


def test_run_folder_of_another_kind_is_refused(tmp_path):
    with RunDir(tmp_path / "t").open("mae", {"method": "mae"}):
        pass
    with pytest.raises(ValueError, match="already holds a mae run"):
        run_task(
            "segment",
            DenseTrainConfig(
                count=20,
                image_size=32,
                epochs=1,
                warmup_epochs=0.0,
                device="cpu",
                out_dir=str(tmp_path / "t"),
                model={"embed_dim": 16, "depth": 1, "num_heads": 2},
            ),
        )


@pytest.mark.parametrize(
    "head,indices,unreached",
    [
        ("linear", None, ("backbone.fc_norm.",)),  # the backbone's pooling norm
        ("decoder", [0], ("backbone.fc_norm.", "backbone.blocks.1.")),  # and the block after the last map read
    ],
)
def test_freeze_unreached_freezes_what_the_loss_does_not_use(head, indices, unreached):
    from vitlab.models.dense import DenseConfig, DenseModel
    from vitlab.tasks.dense.train import dense_loss, freeze_unreached

    model = DenseModel(
        DenseConfig(
            head=head, img_size=16, patch_size=4, embed_dim=16, depth=2, num_heads=2, decoder_width=8, indices=indices
        )
    )
    loss = dense_loss(model.config)(model(torch.rand(2, 3, 16, 16)), torch.randint(0, 5, (2, 16, 16)), None)
    frozen = freeze_unreached(model, loss)
    assert frozen == [n for n, _ in model.named_parameters() if n.startswith(unreached)]
    assert all(p.requires_grad != (n in frozen) for n, p in model.named_parameters())
    assert all(p.grad is None for p in model.parameters())  # nothing accumulated
