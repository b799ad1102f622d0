"""A command reads only the split it uses (and the class list): evaluating on ``val`` never decodes a training
image. The training images are replaced by files that are not images after the checkpoint is made, so decoding
any of them would fail the command."""

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.data.memory import DecodedSplit, decode_records
from vitlab.data.preprocess import Preprocess
from vitlab.models import build_registered
from vitlab.runs import DataConfig, save_checkpoint

SIDE = 8
CLASSES = ("cat", "dog")


def split_folder(root, per_class: dict[str, int]):
    """``root/{train,val}/CLASS/i.png``: grey images, each class its own brightness."""
    for part, count in per_class.items():
        for k, name in enumerate(CLASSES):
            (root / part / name).mkdir(parents=True, exist_ok=True)
            for i in range(count):
                pixels = np.random.default_rng(100 * k + i).normal(40 + 120 * k, 10, (SIDE, SIDE))
                Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8)).save(root / part / name / f"{i}.png")
    return root


def spoil(folder) -> int:
    """Overwrite every image under ``folder`` with bytes no decoder reads; how many."""
    files = sorted(folder.rglob("*.png"))
    for path in files:
        path.write_bytes(b"not an image: decoding this file fails")
    return len(files)


def classifier(path, data_dir):
    torch.manual_seed(0)
    model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2, num_classes=len(CLASSES))
    data = DataConfig((SIDE, SIDE), 1, (0.3,), (0.2,), list(CLASSES), dataset="folder", data_dir=str(data_dir))
    return save_checkpoint(model, path, "classifier", data)


@pytest.mark.parametrize("loader", ["memory", "stream"])
def test_evaluate_on_val_never_opens_a_training_image(tmp_path, capsys, loader):
    data = split_folder(tmp_path / "photos", {"train": 6, "val": 3})
    model = classifier(tmp_path / "m.safetensors", data)
    assert spoil(data / "train") == 12
    args = ["evaluate", str(model), "--split", "val", "--device", "cpu", "--loader", loader, "--set", "data.workers=0"]
    assert main(args) == 0, capsys.readouterr().err
    assert "folder val (6 images)" in capsys.readouterr().out
    assert main(["evaluate", str(model), "--split", "train", "--device", "cpu", "--loader", loader]) == 2
    assert "train/cat/0.png: unreadable image" in capsys.readouterr().err  # the proof that spoiling bites


def test_memory_splits_decode_when_first_used_and_match_eager_decoding(tmp_path):
    data = split_folder(tmp_path / "photos", {"train": 6, "val": 3})
    read = Preprocess(image_size=(SIDE, SIDE), channels=1, mean=(0.3,), std=(0.2,))
    splits = load_dataset("folder", data, preprocess=read, loader="memory", workers=0)
    train = splits.train
    assert isinstance(train, DecodedSplit) and train.image_shape == (1, SIDE, SIDE) and len(train) == 12
    part = train.subset([1, 7]).relabeled(np.array([1, 0]), ["dog", "cat"])
    assert isinstance(part, DecodedSplit) and part.labels.tolist() == [1, 0]  # still undecoded
    images, labels = decode_records(train.records, read, workers=0)
    torch.testing.assert_close(part.images, images[[1, 7]], rtol=0, atol=0)
    assert torch.equal(train.labels, labels) and torch.equal(train.images, images)
    spoil(data / "val")
    with pytest.raises(Exception, match="unreadable image"):
        splits.val.images  # noqa: B018
