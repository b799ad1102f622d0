"""Data identity: a run records what it was trained on (class names, each split's fingerprint and the classes a
split lacks); evaluation, explanation and a teacher refuse data of other classes or match the same classes by
name, saying so; a split whose files changed since training is warned about; a split that drops a class is
reported, never silent."""

import json
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.data.preprocess import Preprocess
from vitlab.errors import CheckpointError
from vitlab.models import build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint
from vitlab.tasks.classify.train import Reordered, teacher_by_name

SIDE = 8


def folder(root, counts: dict[str, int]):
    """A folder dataset: ``counts[class]`` grey images per class, each class its own brightness."""
    for k, (name, count) in enumerate(counts.items()):
        (root / name).mkdir(parents=True, exist_ok=True)
        for i in range(count):
            level = 30 + 60 * k
            pixels = np.clip(np.random.default_rng(100 * k + i).normal(level, 10, (SIDE, SIDE)), 0, 255)
            Image.fromarray(pixels.astype(np.uint8)).save(root / name / f"{i}.png")
    return root


def checkpoint(path, classes, data_dir=None, identity=None):
    """An untrained classifier of ``classes`` recorded as trained on the folder ``data_dir``."""
    torch.manual_seed(0)
    model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2, num_classes=len(classes))
    data = DataConfig(
        (SIDE, SIDE), 1, (0.3,), (0.2,), list(classes), dataset="folder", data_dir=str(data_dir), splits=identity or {}
    )
    return save_checkpoint(model, path, "classifier", data)


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("command", ["evaluate", "explain"])
def test_a_model_is_refused_on_data_of_other_classes(command, tmp_path, capsys):
    data = folder(tmp_path / "zoo", {"dog": 6, "zebra": 6})
    model = checkpoint(tmp_path / "m.safetensors", ("cat", "dog"), data)
    args = [command, str(model), "--dataset", "folder", "--data-dir", str(data), "--device", "cpu"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 2
    line = one_error(capsys)
    assert "was trained on the classes (cat, dog), but folder has (dog, zebra): (zebra) is not among" in line


def test_the_same_classes_in_part_are_matched_by_name_saying_so(tmp_path, capsys):
    data = folder(tmp_path / "zoo", {"cat": 6, "emu": 6})
    model = checkpoint(tmp_path / "m.safetensors", ("cat", "dog", "emu"), data)
    args = ["evaluate", str(model), "--dataset", "folder", "--data-dir", str(data), "--device", "cpu"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert "folder's classes (cat, emu) are 2 of the model's 3: matched by name" in err
    report = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert report["per_class_accuracy"]["dog"] is None and report["per_class_accuracy"]["emu"] is not None
    loaded = load_checkpoint(model)
    with pytest.warns(UserWarning, match="matched by name"):
        splits = loaded.splits("folder", data)
    assert splits.train.classes == ["cat", "dog", "emu"] and set(splits.train.labels.tolist()) == {0, 2}


def test_a_teacher_of_other_classes_is_refused_and_of_the_same_in_another_order_matched(tmp_path):
    data = folder(tmp_path / "zoo", {"cat": 6, "dog": 6})
    splits = load_dataset("folder", data, preprocess=Preprocess(image_size=(SIDE, SIDE), channels=1))
    other = load_checkpoint(checkpoint(tmp_path / "other.safetensors", ("dog", "zebra")))
    with pytest.raises(CheckpointError, match=r"teacher T was trained on the classes \(dog, zebra\)"):
        teacher_by_name(other, splits, "T")
    swapped = load_checkpoint(checkpoint(tmp_path / "swapped.safetensors", ("dog", "cat")))
    with pytest.warns(UserWarning, match="another order: its outputs are matched by name"):
        teacher = teacher_by_name(swapped, splits, "T")
    assert isinstance(teacher, Reordered)
    x = torch.rand(3, 1, SIDE, SIDE)
    assert torch.equal(teacher(x), swapped.model(x)[:, [1, 0]])  # output 0 is now the teacher's "cat"
    same = load_checkpoint(checkpoint(tmp_path / "same.safetensors", ("cat", "dog")))
    assert teacher_by_name(same, splits, "T") is same.model


def test_train_with_a_teacher_of_other_classes_is_one_line(tmp_path, capsys):
    data = folder(tmp_path / "zoo", {"cat": 6, "dog": 6})
    teacher = checkpoint(tmp_path / "t.safetensors", ("dog", "zebra"))
    args = ["train", "--dataset", "folder", "--data-dir", str(data), "--teacher", str(teacher), "--distill", "soft"]
    assert main([*args, "--image-size", str(SIDE), "--set", "data.channels=1", "--epochs", "1", "--quiet"]) == 2
    line = one_error(capsys)
    assert "was trained on the classes (dog, zebra) but folder has (cat, dog)" in line, line


def test_a_split_whose_files_changed_since_training_is_warned_about(tmp_path, capsys):
    data = folder(tmp_path / "zoo", {"cat": 10, "dog": 10})
    recorded = load_dataset("folder", data, preprocess=Preprocess(image_size=(SIDE, SIDE), channels=1)).identity()
    model = checkpoint(tmp_path / "m.safetensors", ("cat", "dog"), data, recorded)
    args = ["evaluate", str(model), "--device", "cpu"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(args) == 0  # unchanged: no warning (the recorded folder is read)
    capsys.readouterr()
    folder(tmp_path / "zoo", {"cat": 18, "dog": 18})  # images added after training
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "differ from what" in err and "images added, removed or relabelled since" in err
    assert "a held-out split may now hold training images" in err


@pytest.mark.slow
def test_a_run_records_each_split_and_reports_a_class_a_split_lacks(tmp_path, capsys):
    data = folder(tmp_path / "zoo", {"cat": 8, "dog": 8, "emu": 2})  # emu: 2 images cannot reach three splits
    out = tmp_path / "run"
    args = ["train", "--dataset", "folder", "--data-dir", str(data), "--image-size", str(SIDE)]
    args += ["--set", "data.channels=1", "--set", "depth=1", "--set", "embed_dim=16", "--set", "num_heads=2"]
    assert main([*args, "--epochs", "1", "--quiet", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the test split holds no image of 1 class(es) (emu)" in err
    recorded = load_checkpoint(out).data
    assert recorded.classes == ["cat", "dog", "emu"]
    assert set(recorded.splits) == {"train", "val", "test"}
    assert recorded.splits["test"]["missing_classes"] == ["emu"]
    assert all(len(part["fingerprint"]) == 64 for part in recorded.splits.values())
    assert main(["evaluate", str(out), "--device", "cpu"]) == 0
    assert "the test split holds no image of 1 class(es) (emu)" in capsys.readouterr().err


def test_tensor_datasets_record_a_fingerprint_of_each_split():
    one, two = load_dataset("digits", rows=64), load_dataset("digits", rows=64)
    assert one.fingerprints == two.fingerprints and set(one.fingerprints) == {"train", "val", "test"}
    assert load_dataset("digits", rows=65).fingerprints["train"] != one.fingerprints["train"]
    assert load_dataset("digits", rows=64, seed=1).fingerprints["val"] != one.fingerprints["val"]
