"""Promptable runs on the engine, tiny: each training prompt is paired with its own object's mask;
training follows the prompt (beats segmenting every object; a prompt on object A gives A, not B); run
folder -> checkpoint -> the same model; the CLI trains and draws an overlay from a point and from a box."""

import json

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import load_dense_dataset
from vitlab.engine.distributed import DistEnv
from vitlab.errors import CheckpointError, ConfigError
from vitlab.models.promptable import BOX_TOP_LEFT, FOREGROUND, PADDING, box_prompt
from vitlab.runs import load_checkpoint
from vitlab.tasks import run as run_task
from vitlab.tasks.promptable import (
    PromptableTrainConfig,
    promptable_checkpoint,
)
from vitlab.tasks.promptable.losses import mask_iou
from vitlab.tasks.promptable.sampling import centre_points, point_prompt
from vitlab.tasks.promptable.train import PromptableTask, build_promptable_model, object_prompts

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
        PromptableTrainConfig.from_options({"head": "linear"})
    with pytest.raises(ConfigError, match="box_prob"):
        PromptableTrainConfig(box_prob=1.5)
    with pytest.raises(ConfigError, match="dataset"):
        PromptableTrainConfig(dataset="coco")
    assert PromptableTrainConfig.from_options({"epochs": 2, "patch_size": 4}).model == {"patch_size": 4}


def test_each_training_prompt_is_paired_with_its_own_objects_mask():
    splits = load_dense_dataset("shapes", count=40, image_size=32, seed=1)
    config = PromptableTrainConfig(count=40, image_size=32, prompts_per_image=3, box_jitter=0.0, model=TINY)
    task = PromptableTask(build_promptable_model(config, splits), splits, config)
    task.prepare(DistEnv(0, 1, 0, torch.device("cpu")), amp=False)
    task.start_epoch(0, seed=5)
    index = torch.tensor([7, 2, 11, 0, 5])
    images, image, points, labels, targets = task.batch(index)
    assert image.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    torch.testing.assert_close(images, splits.train.images[index])
    instances = splits.train.instances[index[image]]
    is_box = labels[:, 0] == BOX_TOP_LEFT
    assert 0 < int(is_box.sum()) < len(labels)
    for q in range(len(labels)):
        ys, xs = torch.nonzero(targets[q], as_tuple=True)
        assert len(ys) and bool((instances[q][targets[q]] == instances[q][ys[0], xs[0]]).all())  # one object
        assert bool((targets[q] == (instances[q] == instances[q][ys[0], xs[0]])).all())  # all of it
        if is_box[q]:  # the exact box of the target
            assert points[q].flatten().tolist() == [xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]
        else:  # a point on the target, then padding
            x, y = points[q, 0].long().tolist()
            assert labels[q].tolist() == [FOREGROUND, PADDING] and bool(targets[q, y, x])


# an 8x8 grid on 32-pixel images; one candidate mask, which every prompt trains (with K, each learns
# from about 1/K of them and a short run's predicted-IoU pick is among K half-trained candidates)
FOLLOWS = {**TINY, "decoder_dim": 32, "patch_size": 4, "num_masks": 1}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A short run (about 10 CPU seconds) on 1,000 images of 32 pixels, with its run folder."""
    splits = load_dense_dataset("shapes", count=1000, image_size=32, seed=0)
    run = tmp_path_factory.mktemp("promptable") / "run"
    config = PromptableTrainConfig(
        count=1000,
        image_size=32,
        epochs=6,
        batch_size=16,
        lr=3e-3,
        warmup_epochs=0.0,
        device="cpu",
        out_dir=str(run),
        model=FOLLOWS,
    )
    return splits, run, run_task("promptable", config, splits)


@pytest.mark.slow
def test_training_follows_the_prompt_beyond_segmenting_every_object(trained):
    splits, _, result = trained
    held_out = object_prompts(splits.test)
    every_object = mask_iou(splits.test.instances[held_out.image] > 0, held_out.targets).mean().item()
    assert result.test["objects"] == len(held_out.image)
    assert result.test["box_miou"] > every_object + 0.1 and result.test["point_miou"] > every_object
    assert result.test["box_miou_best_of_k"] > every_object + 0.2


@pytest.mark.slow
@pytest.mark.parametrize("kind, agree, margin", [("point", 0.85, 0.3), ("box", 0.9, 0.45)])
def test_a_prompt_on_object_a_gives_a_not_b(trained, kind, agree, margin):
    splits, _, result = trained
    two = [i for i, boxes in enumerate(splits.test.boxes) if len(boxes) >= 2]
    images = splits.test.images[two]
    own, other = [], []
    for k in (0, 1):  # two disjoint objects of each image: prompt on one, compare to both
        mine, theirs = (splits.test.instances[two] == j + 1 for j in (k, 1 - k))
        box = torch.stack([splits.test.boxes[i][k] for i in two])
        with torch.no_grad():
            out = result.model(images, *(point_prompt(centre_points(mine)) if kind == "point" else box_prompt(box)))
        best = out["masks"][torch.arange(len(two)), out["iou"].argmax(1)] > 0
        own.append(mask_iou(best, mine))
        other.append(mask_iou(best, theirs))
    own_iou, other_iou = torch.cat(own), torch.cat(other)
    assert len(two) > 20
    assert float((own_iou > other_iou).float().mean()) > agree and own_iou.mean() > other_iou.mean() + margin


@pytest.mark.slow
def test_a_run_folder_round_trips_to_the_same_model(trained):
    splits, run, result = trained
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
    assert (
        main(["predict", run, str(tmp_path / "img.png"), "--box", "2,2,20,30", "--out", str(out), "--overwrite"]) == 0
    )
    assert main(["predict", run, str(tmp_path / "img.png"), "--box", "2,2,20"]) == 2
    assert "--box takes 4" in capsys.readouterr().err
    assert main(["predict", run, str(tmp_path / "img.png")]) == 2
    assert main(["train", "--task", "promptable", "--head", "linear", "--out", str(tmp_path / "r2"), *FLAGS]) == 2


def test_a_classifier_checkpoint_is_refused_as_promptable(tmp_path):
    from vitlab.models import build_registered
    from vitlab.runs import DataConfig, save_checkpoint

    path = save_checkpoint(
        build_registered("vit-digits"), tmp_path / "m.safetensors", "classifier", DataConfig((8, 8), 1, (0.0,), (1.0,))
    )
    with pytest.raises(CheckpointError, match="not a promptable"):
        promptable_checkpoint(path, device="cpu")
