"""data.decode=gpu on the CPU kernels: the same crops, labels and unreadable images as the workers' PIL path."""

import json
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import load_dataset, read_records, stream
from vitlab.data.device_decode import decode_batch
from vitlab.data.options import DataOptions
from vitlab.data.preprocess import Preprocess
from vitlab.data.stream import StreamDataset
from vitlab.errors import ConfigError


def write_jpegs(root, per_class=5, classes=("ant", "bee")):
    """Smooth photos (gradients and a wave, one channel per class raised) of 40-90 px sides, JPEG quality 90."""
    rng = np.random.default_rng(0)
    for label, cls in enumerate(classes):
        (root / cls).mkdir(parents=True)
        for k in range(per_class):
            height, width = (int(v) for v in rng.integers(40, 90, 2))
            y, x = np.mgrid[0:height, 0:width] / max(height, width)
            waves = [np.sin(6 * x + c) * 60 + 120 * y + 40 for c in range(3)]
            pixels = np.stack(waves, -1)
            pixels[..., label] += 60
            Image.fromarray(pixels.clip(0, 255).astype(np.uint8)).save(root / cls / f"{k:02d}.jpg", quality=90)
    return root


def epoch(root, decode, train, preprocess, seed=3, **kw):
    data = StreamDataset(read_records("folder", root)["train"], preprocess, train=train, decode=decode, **kw)
    index = torch.randperm(len(data), generator=torch.Generator().manual_seed(0))
    batches = list(data.batches(index, 4, seed=seed, workers=kw.pop("workers", 0)))
    return torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches]), data


def test_same_crops_exactly_with_the_tensor_resize_and_to_a_grey_level_with_pil(tmp_path):
    root = write_jpegs(tmp_path)
    exact = Preprocess(image_size=(24, 24), resize_backend="tensor", crop_pct=0.875, crop_mode="center")
    for train in (True, False):  # decoding is libjpeg-turbo both ways: same box, same kernel -> same pixels
        x_cpu, y_cpu, _ = epoch(root, "cpu", train, exact)
        x_gpu, y_gpu, _ = epoch(root, "gpu", train, exact, workers=2)
        assert x_gpu.dtype == torch.uint8 and x_gpu.shape == (10, 3, 24, 24)
        assert torch.equal(y_gpu, y_cpu) and torch.equal(x_gpu, x_cpu), train
    pil = Preprocess(image_size=(24, 24), interpolation="bicubic", crop_pct=0.875, crop_mode="center")
    for train in (True, False):  # PIL's filters on the CPU path, torchvision's kernels on the device
        x_cpu, y_cpu, _ = epoch(root, "cpu", train, pil)
        x_gpu, y_gpu, _ = epoch(root, "gpu", train, pil)
        diff = (x_gpu.float() - x_cpu.float()).abs()
        assert torch.equal(y_gpu, y_cpu) and diff.mean() < 1.0 and diff.max() <= 12, (train, diff.mean(), diff.max())
    other, _, _ = epoch(root, "gpu", True, pil, seed=4)
    assert (other.float() - x_gpu.float()).abs().mean() > 5  # a crop that moved would show


def test_other_images_decode_on_the_cpu_said_once_and_unreadable_ones_count_as_on_the_cpu(tmp_path):
    root = write_jpegs(tmp_path)
    Image.new("RGB", (50, 30), (200, 10, 10)).save(root / "ant" / "png.png")
    whole = (root / "bee" / "01.jpg").read_bytes()
    (root / "bee" / "cut.jpg").write_bytes(whole[: len(whole) // 2])  # a header that reads, pixels that do not
    (root / "bee" / "text.jpg").write_bytes(b"not an image")
    pre = Preprocess(image_size=(16, 16))
    x_cpu, y_cpu, cpu = epoch(root, "cpu", False, pre, max_bad=2)
    with pytest.warns(UserWarning, match=r"decode=gpu: .*png.png is not an RGB or greyscale JPEG") as said:
        x_gpu, y_gpu, gpu = epoch(root, "gpu", False, pre, max_bad=2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # not said twice, though the next epoch meets the PNG again
            list(gpu.batches(range(len(gpu)), 4, workers=0))
    assert len(said) == 1 and torch.equal(y_gpu, y_cpu) and len(x_gpu) == 11
    assert (x_gpu.float() - x_cpu.float()).abs().mean() < 1.0
    assert sorted(gpu.bad) == sorted(cpu.bad) and len(gpu.bad) == 2
    assert "cut.jpg: unreadable image" in gpu.bad[str(root / "bee" / "cut.jpg")]


def test_the_option_reaches_the_stream_and_bad_values_are_one_line(tmp_path):
    root = write_jpegs(tmp_path, per_class=4)
    splits = load_dataset("folder", root, loader="stream", decode="gpu")
    assert splits.train.decode == "gpu" and splits.train.on("cpu").decode == "gpu"
    with pytest.raises(ConfigError, match=r"decode must be 'cpu' or 'gpu', got 'tpu'"):
        DataOptions.from_dict({"decode": "tpu"})
    records = read_records("folder", root)["train"]
    with pytest.raises(ConfigError, match=r"no 'box' filter: set data.interpolation to one of .*or data.decode=cpu"):
        StreamDataset(records, Preprocess(interpolation="box"), decode="gpu")


def test_a_training_run_and_evaluate_decode_on_their_device_and_record_the_choice(tmp_path, capsys, monkeypatch):
    photos = write_jpegs(tmp_path / "photos", per_class=6)
    Image.new("RGB", (30, 20), (0, 90, 0)).save(photos / "bee" / "png.png")  # said once: the path ran
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "16", "--loader", "stream"]
    argv += ["--epochs", "1", "--batch-size", "4", "--device", "cpu", "--set", "warmup_epochs=0"]
    argv += ["--set", "depth=1", "--set", "embed_dim=32", "--set", "num_heads=2", "--set", "patch_size=8"]
    run = ["--out", str(tmp_path / "run"), "--set", "data.workers=1", "--set", "data.decode=gpu"]
    assert main([*argv, *run]) == 0
    assert capsys.readouterr().err.count("png.png is not an RGB or greyscale JPEG: it and any other") == 1
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["data"]["decode"] == "gpu"
    decoded = []  # evaluate decodes as asked too
    monkeypatch.setattr(stream, "decode_batch", lambda *a: decoded.append(len(a[0])) or decode_batch(*a))
    evaluate = ["evaluate", str(tmp_path / "run"), "--split", "val", "--set", "data.loader=stream"]
    assert main([*evaluate, "--set", "data.decode=gpu"]) == 0
    assert sum(decoded) == len(load_dataset("folder", photos, loader="stream").val)
    assert main([*argv, "--out", str(tmp_path / "bad"), "--set", "data.decode=tpu"]) == 2
    assert "decode must be 'cpu' or 'gpu', got 'tpu'" in capsys.readouterr().err
