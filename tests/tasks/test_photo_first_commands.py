"""The first photo commands on anyone's photos: a hub classifier whose head is for other classes is scored by
its frozen features (said in one line), a refusal names the options that apply; a training into a folder it may
not write is refused before any image is read; ``metrics.csv`` logs the rate the user set; progress shows on a
pipe with an estimate of the run's time."""

import csv
import io

import pytest
import torch

from vitlab.cli.main import main
from vitlab.engine.report import TqdmReporter, estimate_line, step_line

CLASSES = ("ant", "bee", "cat")
HUB_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


@pytest.fixture
def hub_id(hub_cache, tmp_path):
    """A random-init timm ViT with a 1000-class head (not the photos' 3), cached offline as ``HUB_ID``."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=1000, depth=1).eval()
    save_for_hf(model, tmp_path / "push", safe_serialization=True)
    hub_cache(HUB_ID, tmp_path / "push")
    return HUB_ID


@pytest.fixture
def photos(hue_photos, tmp_path):
    hue_photos(tmp_path / "photos" / "train", 4, seed=1, sides=(60, 120))
    hue_photos(tmp_path / "photos" / "val", 2, seed=2, sides=(60, 120))
    return tmp_path / "photos"


def test_a_head_for_other_classes_is_scored_by_its_frozen_features(hub_id, photos, capsys):
    argv = ["evaluate", hub_id, "--dataset", "folder", "--data-dir", str(photos), "--split", "val", "--device", "cpu"]
    assert main(argv) == 0
    first, second = capsys.readouterr().out.strip().splitlines()
    assert first.startswith("its head predicts 1000 classes, not folder's 3: scoring its frozen features by 20-NN")
    assert "--linear-probe" in first
    assert "frozen features, 20-NN fitted on 12 train rows: folder val (6 images) accuracy" in second
    accuracy = float(second.rsplit(" ", 1)[1])
    assert 0.0 <= accuracy <= 1.0


def test_a_refusal_for_a_head_of_other_classes_names_the_options(hub_id, photos, tmp_path, capsys):
    argv = ["evaluate", hub_id, "--dataset", "folder", "--data-dir", str(photos), "--split", "val", "--device", "cpu"]
    assert main([*argv, "--out", str(tmp_path / "report")]) == 2  # files need the head: refused
    (err,) = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert "1000 outputs but folder has 3 classes" in err
    assert all(option in err for option in ("--knn", "--linear-probe", "vitlab train --init", "--dataset"))


def test_an_occupied_out_is_refused_before_any_image_is_read(tmp_path, capsys):
    photos = tmp_path / "photos"
    for name in CLASSES:  # files no reader can decode: reading any would fail with another message
        (photos / name).mkdir(parents=True)
        for i in range(3):
            (photos / name / f"{i}.jpg").write_bytes(b"not an image")
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    argv = ["train", "--dataset", "folder", "--data-dir", str(photos), "--out", str(out), "--epochs", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is not a vitlab run" in err and "not an image" not in err and "jpg" not in err


@pytest.mark.slow
def test_metrics_csv_logs_the_rate_set_not_the_decayed_layers(tmp_path):
    out = tmp_path / "run"
    argv = ["train", "--rows", "64", "--batch-size", "32", "--epochs", "1", "--out", str(out), "--quiet"]
    argv += ["--set", "depth=2", "--set", "embed_dim=16", "--set", "num_heads=2", "--set", "layer_decay=0.5"]
    argv += ["--set", "schedule=constant", "--set", "warmup_epochs=0", "--lr", "0.002"]
    assert main(argv) == 0
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert float(rows[0]["lr"]) == pytest.approx(0.002)  # the embeddings trained at 0.002 * 0.5**3


def test_progress_on_a_pipe_is_lines_with_an_estimate(monkeypatch):
    pipe = io.StringIO()  # not a terminal
    monkeypatch.setattr("sys.stderr", pipe)
    reporter = TqdmReporter(line_seconds=3600.0)
    assert reporter.lines and reporter.every == 1
    reporter.start(epochs=3, start_epoch=0, steps_per_epoch=4)
    for step in range(1, 5):
        reporter.step(1, step, {"loss": 1.5, "acc": 0.25}, images_per_s=2.5)
    lines = pipe.getvalue().splitlines()
    assert (
        lines[0].startswith("about ") and "for 3 epochs x 4 steps (~2.5 img/s, measured on the first 1 step" in lines[0]
    )
    assert lines[1:] == [  # the first step, then one per line_seconds, and the epoch's last
        step_line(1, 3, 1, 4, {"loss": 1.5, "acc": 0.25}, 2.5),
        step_line(1, 3, 4, 4, {"loss": 1.5, "acc": 0.25}, 2.5),
    ]
    assert lines[1] == "epoch 1/3  step 1/4  loss 1.5000 acc 0.2500  2.5 img/s"


def test_quiet_progress_writes_nothing(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    reporter = TqdmReporter(disable=True)
    reporter.start(epochs=1, start_epoch=0, steps_per_epoch=2)
    reporter.step(1, 1, {"loss": 1.0}, images_per_s=1.0)
    assert not reporter.lines and pipe.getvalue() == ""


@pytest.mark.parametrize(
    ("seconds", "text"), [(10.0, "about 60 s for 2 epochs"), (100.0, "about 10 min"), (3600.0, "about 6.0 h")]
)
def test_the_estimate_scales_the_first_steps_to_the_run(seconds, text):
    assert estimate_line(2, 3, 1, seconds, 1.0).startswith(text)  # 6 steps at `seconds` each


@pytest.mark.parametrize("batch_size", [4, 5])
def test_frozen_features_are_the_same_streamed_or_held_in_memory(hub_id, photos, batch_size):
    from vitlab.data.options import DataOptions
    from vitlab.data.stream import StreamDataset
    from vitlab.runs import load_checkpoint
    from vitlab.tasks.ssl import extract_features

    loaded = load_checkpoint(hub_id, "cpu")
    features = {}
    for loader in ("memory", "stream"):
        splits = loaded.splits("folder", photos, options=DataOptions(loader=loader))
        assert isinstance(splits.val, StreamDataset) == (loader == "stream")
        features[loader] = extract_features(loaded.model, splits.val, splits, batch_size=batch_size)
    (held, held_labels), (streamed, streamed_labels) = features["memory"], features["stream"]
    assert held.shape == (6, 192) and torch.equal(held_labels, streamed_labels)
    torch.testing.assert_close(streamed, held)
