"""A newcomer's first hour, in a fresh folder: after `vitlab compare` the explorer opens every page on a model it
kept; after fine-tuning a 224-px hub model on a folder of photos (found where the run recorded it, from another
folder), the explorer reads the run's own photos at the model's size, scores them as `vitlab evaluate` does, and
gives an upload the probabilities `vitlab predict` gives; and a folder with nothing trained offers to train."""

import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from fastapi.testclient import TestClient
from PIL import Image

from vitlab.cli.main import main
from vitlab.errors import DataError
from vitlab.explore import create_app
from vitlab.explore.launch import launch_config
from vitlab.runs import load_checkpoint
from vitlab.tasks.classify.predict import classify_files
from vitlab.tasks.classify.train import evaluate_checkpoint

pytestmark = pytest.mark.slow  # trains

CLASSES = ("ant", "bee", "cat")
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


def client_for(app) -> TestClient:
    return TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})


def every_page_answers(client: TestClient) -> dict:
    """Each page's first request for each model loaded answers 200: attention, maps, the forward pass of a ViT
    that can be traced, and the Limits page's verdicts on the model's own samples."""
    info = client.get("/api/info").json()
    assert info["models"], "no model loaded"
    available = {s["name"] for s in info["samples"] if s["available"]}
    for model in info["models"]:
        assert model["samples"] in available, model
        ref = f"{model['samples']}:0"
        for path, params in [
            ("/api/attention", {}),
            ("/api/maps", {}),
            ("/api/limits/verdicts", {"source": model["samples"]}),
            ("/api/tokens", {}),
        ]:
            if path == "/api/tokens" and model["patch_size"] is None:
                continue
            response = client.get(path, params={"model": model["index"], "ref": ref, **params})
            assert response.status_code == 200, (path, model["model"], response.text)
        if model["forward_pass"] is None:
            response = client.get("/api/forward", params={"model": model["index"], "ref": ref, "query": 0})
            assert response.status_code == 200, response.text
    return info


def test_after_compare_every_page_opens_on_a_model_it_kept(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["compare", "--rows", "48", "--epochs", "1", "--patches", "4", "--augment", "none", "--threads", "1"]
    assert main(argv) == 0
    kept = sorted(Path("runs/compare/models").glob("*.safetensors"))
    assert len(kept) == 2
    results = json.loads(Path("runs/compare/results.json").read_text())
    for file in kept:  # each kept model is the one the study scored
        loaded = load_checkpoint(file)
        assert loaded.data.dataset == "digits" and loaded.display_name in ("vit-digits", "cnn-digits")
    config = launch_config()
    assert [Path(c) for c in config.checkpoints] == kept
    info = every_page_answers(client_for(create_app(config)))
    names = [m["model"] for m in info["models"]]
    assert len(set(names)) == len(names) and all("None" not in n for n in names)
    assert len(results["runs"]) == len(kept)


def test_a_folder_with_nothing_trained_offers_to_train_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    client = client_for(create_app(launch_config()))
    info = client.get("/api/info").json()
    assert info["models"] == [] and info["training"]["root"] == str(tmp_path / "runs")


@pytest.fixture
def tuned(hub_cache, hue_photos, tmp_path, monkeypatch):
    """A random-init timm ViT-Tiny (224 px, depth 2) from a local hub cache, fine-tuned one epoch on
    ``project/photos`` (recorded as the relative ``photos``); the project folder."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=len(CLASSES), depth=2).eval()
    model.pretrained_cfg = {**model.pretrained_cfg, "interpolation": "bicubic", "crop_pct": 0.9, "crop_mode": "center"}
    model.pretrained_cfg |= {"mean": (0.5, 0.5, 0.5), "std": (0.5, 0.5, 0.5)}
    save_for_hf(model, tmp_path / "push", model_config={"label_names": list(CLASSES)}, safe_serialization=True)
    hub_cache(TIMM_ID, tmp_path / "push")
    project = tmp_path / "project"
    hue_photos(project / "photos" / "train", 4, seed=1, sides=(200, 400))
    hue_photos(project / "photos" / "val", 3, seed=2, sides=(200, 400))
    monkeypatch.chdir(project)
    argv = ["train", "--init", TIMM_ID, "--recipe", "finetune", "--dataset", "folder", "--data-dir", "photos"]
    argv += ["--epochs", "1", "--batch-size", "6", "--device", "cpu", "--out", "runs/photos", "--threads", "1"]
    assert main(argv) == 0
    return project


def test_a_fine_tuned_hub_model_is_fed_as_it_was_trained(tuned, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the explorer started from another folder still finds the run's photos
    run = tuned / "runs" / "photos"
    client = client_for(create_app(launch_config(runs=[tuned / "runs"])))
    info = every_page_answers(client)
    (model,) = info["models"]
    assert model["model"] == "photos" and model["samples"] == "folder@0" and not model["reads_digits"]
    assert model["data_dir"] == str((tuned / "photos").resolve())

    samples = client.get("/api/samples/folder@0", params={"count": 2}).json()
    assert samples["images"]["shape"][-2:] == [224, 224]  # read at the model's size, not 32x32 upscaled

    verdicts = client.get("/api/limits/verdicts", params={"model": 0, "source": "folder@0"}).json()
    monkeypatch.chdir(tuned)  # `vitlab evaluate` where the run was made, on the split the explorer shows
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            report = evaluate_checkpoint(str(run), split="test")
        except DataError:  # photos/ with train/ and val/ alone: the explorer shows val
            report = evaluate_checkpoint(str(run), split="val")
    assert verdicts["images"] == report["n"] and verdicts["accuracy"] == pytest.approx(report["accuracy"], abs=1e-12)

    photo = tuned / "photos" / "val" / "bee" / "000.jpg"
    upload = client.post("/api/uploads", files={"file": ("bee.jpg", photo.read_bytes(), "image/jpeg")}).json()
    seen = client.get("/api/attention", params={"model": 0, "ref": upload["ref"]}).json()
    explorer = dict(zip(model["classes"], seen["prediction"]["probabilities"]))
    (predicted,) = classify_files(load_checkpoint(run), [photo], top_k=len(CLASSES))
    for name, probability in predicted.top:
        assert explorer[name] == pytest.approx(probability, abs=1e-5)
    assert seen["seen"]["out_of_domain"] is None  # one of its own photos is not "far from the training images"


def test_a_sixteen_bit_png_upload_reads_as_its_true_grey(tmp_path):
    from vitlab.explore.images import decode_upload

    buffer = io.BytesIO()
    Image.fromarray(np.full((16, 16), 32768, dtype=np.uint16)).save(buffer, "PNG")
    assert float(decode_upload(buffer.getvalue()).mean()) == pytest.approx(0.5, abs=1 / 255)
