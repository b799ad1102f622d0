"""Training on image files: the streamed path trains exactly as the in-memory one, resumes exactly,
runs under DDP (each image once per epoch across ranks), and fine-tunes at the model's own size."""

import json

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp
from PIL import Image
from tests.gloo import as_torchrun_rank, free_port

from vitlab.cli.main import main
from vitlab.engine import Reporter
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

TINY = {"depth": 1, "embed_dim": 32, "num_heads": 2, "patch_size": 8}


def make_photos(root, per_class: int = 12, classes=("ant", "bee", "cat"), seed: int = 0):
    """JPEGs of mixed sizes (40-72 px a side): each class its own colour, so a model can learn them."""
    rng = np.random.default_rng(seed)
    for c, name in enumerate(classes):
        folder = root / name
        folder.mkdir(parents=True)
        for i in range(per_class):
            h, w = rng.integers(40, 73, size=2)
            base = np.zeros((h, w, 3))
            base[..., c] = 180
            noise = rng.normal(0, 30, size=(h, w, 3))
            Image.fromarray(np.clip(base + noise + 40, 0, 255).astype(np.uint8)).save(
                folder / f"{i:03d}.jpg", quality=90
            )
    return root


def config(tmp_path, loader: str, **extra) -> TrainConfig:
    fields = dict(
        model="vit-digits",
        model_overrides=TINY,
        dataset="folder",
        data_dir=str(tmp_path / "photos"),
        epochs=2,
        batch_size=8,
        augment="none",
        warmup_epochs=0.0,
        device="cpu",
        data={"image_size": 32, "loader": loader, "workers": 1},
    )
    return TrainConfig(**{**fields, **extra})


@pytest.fixture
def photos(tmp_path):
    return make_photos(tmp_path / "photos")


def test_streamed_training_equals_in_memory_training(tmp_path, photos):
    memory = run("classify", config(tmp_path, "memory"))
    stream = run("classify", config(tmp_path, "stream"))
    for key, value in memory.model.state_dict().items():
        torch.testing.assert_close(stream.model.state_dict()[key], value, rtol=0, atol=1e-6, msg=key)
    assert [r["train_loss"] for r in stream.history] == pytest.approx([r["train_loss"] for r in memory.history])
    assert stream.test == pytest.approx(memory.test)


class KilledError(Exception):
    pass


class StopAfterFirstEpoch(Reporter):
    def epoch(self, record):
        raise KilledError


@pytest.mark.slow
def test_streamed_training_with_crops_resumes_exactly(tmp_path, photos):
    augment = {"augment": {"resized_crop": 0.3, "hflip": True}}
    whole = run("classify", config(tmp_path, "stream", out_dir=str(tmp_path / "whole"), **augment))
    with pytest.raises(KilledError):
        run(
            "classify",
            config(tmp_path, "stream", out_dir=str(tmp_path / "cut"), **augment),
            reporter=StopAfterFirstEpoch(),
        )
    resumed = run("classify", config(tmp_path, "stream", out_dir=str(tmp_path / "cut"), resume=True, **augment))
    assert [r["epoch"] for r in resumed.history] == [1, 2]
    for key, value in whole.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[key], value, rtol=0, atol=0, msg=key)
    assert resumed.test == whole.test


def worker(rank: int, world_size: int, port: int, root: str, out: str) -> None:
    as_torchrun_rank(rank, world_size, port)
    from pathlib import Path

    result = run("classify", config(Path(root), "stream", batch_size=4))
    if rank == 0:
        torch.save({"weights": result.model.state_dict(), "history": result.history}, out)


@pytest.mark.slow
def test_two_streaming_processes_match_one_with_twice_the_batch(tmp_path, photos):
    out = str(tmp_path / "ddp.pt")
    mp.spawn(worker, args=(2, free_port(), str(tmp_path), out), nprocs=2, join=True)
    ddp = torch.load(out, weights_only=True)
    single = run("classify", config(tmp_path, "stream", batch_size=8))
    for key, value in single.model.state_dict().items():
        torch.testing.assert_close(ddp["weights"][key], value, rtol=0, atol=1e-5, msg=key)
    for a, b in zip(ddp["history"], single.history):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-5)


def test_cli_image_size_and_loader_reach_the_run(tmp_path, photos, capsys):
    out = tmp_path / "run"
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "24", "--loader", "stream"]
    argv += ["--epochs", "1", "--batch-size", "8", "--device", "cpu", "--out", str(out)]
    argv += ["--set", "depth=1", "--set", "embed_dim=32", "--set", "num_heads=2", "--set", "patch_size=8"]
    assert main([*argv, "--set", "data.crop_pct=0.875", "--set", "data.crop_mode=center"]) == 0
    err = capsys.readouterr().err
    assert "stream" in err and "24x24" in err
    recorded = json.loads((out / "config.json").read_text())["data"]
    assert recorded["image_size"] == [24, 24] and recorded["loader"] == "stream" and recorded["crop_pct"] == 0.875
    from vitlab import load_checkpoint

    data = load_checkpoint(out).data
    assert tuple(data.image_size) == (24, 24) and data.crop_pct == 0.875 and data.crop_mode == "center"


@pytest.mark.parametrize(
    "setting, words",
    [
        ("data.image_size=0", "image_size"),
        ("data.crop_pct=2.5", "crop_pct"),
        ("data.crop_mode=zoom", "crop_mode"),
        ("data.interpolation=cubic", "interpolation"),
        ("data.loader=disk", "loader"),
        ("data.mean=[0.5]", "data.mean and data.std"),
        ("data.wrkers=2", "wrkers"),
        ("data.workers=-1", "workers"),
    ],
)
def test_bad_data_settings_get_one_line(tmp_path, photos, capsys, setting, words):
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--epochs", "1", "--set", setting]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_unreadable_photos_are_skipped_counted_and_reported(tmp_path, photos, capsys):
    (photos / "bee" / "999.jpg").write_bytes(b"not a jpeg")
    out = tmp_path / "run"
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "16", "--loader", "stream"]
    argv += ["--epochs", "1", "--batch-size", "8", "--device", "cpu", "--out", str(out), "--set", "data.workers=0"]
    argv += ["--set", "depth=1", "--set", "embed_dim=32", "--set", "num_heads=2", "--set", "patch_size=8"]
    assert main(argv) == 2  # none tolerated by default: one line naming the file
    err = capsys.readouterr().err
    assert "999.jpg" in err and "data.max_bad_images" in err and "Traceback" not in err
    assert main([*argv, "--set", "data.max_bad_images=1", "--overwrite"]) == 0
    assert "999.jpg" in capsys.readouterr().err
    skipped = json.loads((out / "summary.json").read_text())["skipped_images"]
    assert skipped["count"] == 1 and skipped["first"][0].endswith("999.jpg")


def test_a_run_records_its_data_folder_resolved(tmp_path, photos, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("classify", config(tmp_path, "memory", data_dir="photos", epochs=1, out_dir=str(tmp_path / "run")))
    from vitlab import load_checkpoint

    assert load_checkpoint(tmp_path / "run").data.data_dir == str(photos)
    elsewhere = tmp_path / "elsewhere"
    make_photos(elsewhere / "photos", classes=("x", "y", "z"))
    monkeypatch.chdir(elsewhere)  # a folder of the same relative name here is not the run's data
    from vitlab.tasks import evaluate_checkpoint

    assert evaluate_checkpoint(tmp_path / "run")["accuracy"] == result.test["acc"]


def test_explain_and_evaluate_read_a_folder_run_at_another_size(tmp_path, photos, capsys):
    out = tmp_path / "run"
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--image-size", "24", "--epochs", "1"]
    argv += ["--batch-size", "8", "--device", "cpu", "--out", str(out), "--set", "depth=1", "--set", "embed_dim=32"]
    assert main([*argv, "--set", "num_heads=2", "--set", "patch_size=8"]) == 0
    explained = tmp_path / "explained"
    assert main(["explain", str(out), "--image-size", "32", "--device", "cpu", "--out", str(explained)]) == 0
    assert json.loads((explained / "explain.json").read_text())["grid"] == [4, 4]  # 32 px in patches of 8
    assert main(["evaluate", str(out), "--image-size", "32", "--split", "val", "--device", "cpu"]) == 0
    assert "folder val (6 images)" in capsys.readouterr().out


@pytest.mark.slow
def test_compare_reads_at_the_image_size_given(tmp_path):
    out = tmp_path / "study"
    argv = ["compare", "--image-size", "12", "--rows", "60", "--epochs", "1", "--patches", "4", "--augment", "none"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "results.json").read_text())["data"]["image_shape"] == [1, 12, 12]
