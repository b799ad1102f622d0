"""Promptable runs on the engine, tiny: training beats a trivial baseline; run folder -> checkpoint
-> the same model; the CLI trains and draws an overlay from a point and from a box."""

import json

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data.shapes import load_dense_dataset
from vitlab.errors import CheckpointError, ConfigError
from vitlab.prompt import PromptableTrainConfig, promptable_checkpoint, promptable_train_config, train_promptable
from vitlab.prompt.losses import mask_iou
from vitlab.prompt.train import object_prompts
from vitlab.runs import load_checkpoint

TINY = {"embed_dim": 32, "depth": 1, "num_heads": 2, "decoder_dim": 16, "decoder_depth": 1, "decoder_heads": 2}
FLAGS = [
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
    "decoder_dim=16",
    "--set",
    "decoder_depth=1",
    "--set",
    "warmup_epochs=0",
]


def test_config_refuses_unknown_and_out_of_range_options():
    with pytest.raises(ConfigError, match="unknown promptable"):
        promptable_train_config({"head": "linear"})
    with pytest.raises(ConfigError, match="box_prob"):
        PromptableTrainConfig(box_prob=1.5)
    with pytest.raises(ConfigError, match="dataset"):
        PromptableTrainConfig(dataset="coco")
    assert promptable_train_config({"epochs": 2, "patch_size": 4}).model == {"patch_size": 4}


@pytest.mark.slow
def test_tiny_training_beats_the_whole_image_baseline_and_round_trips(tmp_path):
    splits = load_dense_dataset("shapes", count=400, image_size=32, seed=0)
    run = tmp_path / "run"
    config = PromptableTrainConfig(
        count=400,
        image_size=32,
        epochs=8,
        batch_size=16,
        lr=3e-3,
        warmup_epochs=0.0,
        device="cpu",
        out_dir=str(run),
        model=TINY,
    )
    result = train_promptable(config, splits)
    held_out = object_prompts(splits.test)
    whole_image = mask_iou(torch.ones_like(held_out.targets), held_out.targets).mean().item()
    assert result.test["objects"] == len(held_out.image)
    assert result.test["box_miou"] > 2 * whole_image and result.test["point_miou"] > 2 * whole_image
    assert set(result.val) == set(result.test) and json.loads((run / "run.json").read_text())["kind"] == "promptable"
    loaded = load_checkpoint(run)
    assert loaded.kind == "promptable" and loaded.data.image_size == (32, 32)
    images, points, labels = splits.test.images[:4], torch.rand(4, 2, 2) * 32, torch.tensor([[1, -1]] * 4)
    with torch.no_grad():
        expected, got = result.model(images, points, labels), loaded.model(images, points, labels)
    torch.testing.assert_close(got["masks"], expected["masks"], rtol=0, atol=0)


@pytest.mark.slow
def test_cli_trains_and_predicts_from_a_point_and_a_box(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["train", "--task", "promptable", "--out", run, *FLAGS]) == 0
    assert "from one box" in capsys.readouterr().out
    Image.new("RGB", (40, 40), (200, 10, 10)).save(tmp_path / "img.png")
    out = tmp_path / "overlay.png"
    assert main(["predict", run, str(tmp_path / "img.png"), "--point", "10,12", "--out", str(out)]) == 0
    assert "predicted IoU" in capsys.readouterr().out and Image.open(out).size == (160, 160)
    assert main(["predict", run, str(tmp_path / "img.png"), "--box", "2,2,20,30", "--out", str(out)]) == 0
    assert main(["predict", run, str(tmp_path / "img.png"), "--box", "2,2,20"]) == 2
    assert "--box takes 4" in capsys.readouterr().err
    assert main(["predict", run, str(tmp_path / "img.png")]) == 2
    assert main(["train", "--task", "promptable", "--head", "linear", "--out", str(tmp_path / "r2"), *FLAGS]) == 2


def test_a_classifier_checkpoint_is_refused_as_promptable(tmp_path):
    from vitlab.models import create_model
    from vitlab.runs import DataConfig, save_checkpoint

    path = save_checkpoint(
        create_model("vit-digits"), tmp_path / "m.safetensors", "classifier", DataConfig((8, 8), 1, (0.0,), (1.0,))
    )
    with pytest.raises(CheckpointError, match="not a promptable"):
        promptable_checkpoint(path, device="cpu")
