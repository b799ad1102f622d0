"""The explorer feeds a model as it was trained: every picture goes through the model's recorded Preprocess (an
upload from its file, through the same image door as `vitlab predict`), a sample already at the model's size as
it is, and the model is named and its photos found as every command does."""

import io
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import vitlab
from vitlab.data import decode_image
from vitlab.data.preprocess import Preprocess
from vitlab.explore.checkpoints import load_model, recorded_folder
from vitlab.explore.images import LabeledImage, decode_upload, model_image, model_images
from vitlab.runs import DataConfig, save_checkpoint


def picture(seed: int = 0, size: tuple[int, int] = (60, 90)) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, size=(*size, 3), dtype=np.uint8)
    return torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255


def png(image: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    return buffer.getvalue()


@pytest.mark.parametrize(
    "preprocess",
    [
        Preprocess(image_size=(32, 32), crop_mode="center", crop_pct=0.875, interpolation="bicubic"),
        Preprocess(image_size=(24, 40), crop_mode="border", crop_pct=0.9, mean=(0.5,) * 3, std=(0.5,) * 3),
        Preprocess(image_size=(16, 16)),
        Preprocess(image_size=(20, 20), channels=1, interpolation="lanczos"),
    ],
)
def test_a_sample_of_another_size_is_read_by_the_models_own_pipeline(preprocess):
    image = picture()
    pil = Image.fromarray((image[0] * 255).round().to(torch.uint8).permute(1, 2, 0).numpy())
    expected = preprocess.eval_image(pil).float() / 255
    assert torch.equal(model_images(image, preprocess)[0], expected)


def test_a_sample_at_the_models_size_is_fed_as_it_is():
    image = picture(size=(16, 16))
    assert model_images(image, Preprocess(image_size=(16, 16))) is image


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("crop_mode", ["center", "squash", "border"])
def test_an_upload_is_read_from_its_file_as_predict_reads_it(seed, crop_mode):
    rng = np.random.default_rng(seed)
    h, w = (int(v) for v in rng.integers(40, 400, size=2))
    data = png(rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8))
    preprocess = Preprocess(image_size=(32, 32), crop_mode=crop_mode, crop_pct=0.875, interpolation="bicubic")
    upload = LabeledImage("upload:x", decode_upload(data, max_side=64), None, data)
    expected = preprocess.eval_image(decode_image(data)).float() / 255  # what `vitlab predict` reads
    assert torch.equal(model_image(upload, preprocess)[0], expected)


@pytest.mark.parametrize("level", [0, 1, 257, 32768, 65535])
def test_a_sixteen_bit_png_is_read_through_the_image_door(level):
    data = png(np.full((12, 20), level, dtype=np.uint16))
    assert Image.open(io.BytesIO(data)).mode == "I;16"
    shown = decode_upload(data)
    assert shown.shape[1] == 1
    assert torch.allclose(shown, torch.full_like(shown, level / 65535), atol=1 / 255)


def test_a_model_with_more_outputs_than_class_names_names_each_output(tmp_path):
    model = vitlab.create_model("vit-digits", num_classes=12, depth=1, embed_dim=16, num_heads=2)
    data = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)])
    save_checkpoint(model, tmp_path / "model.safetensors", "classifier", data)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        entry, _ = load_model(tmp_path / "model.safetensors", 0)
    assert entry.classes == [str(i) for i in range(12)]
    assert entry.name == "vit-digits"


@pytest.mark.parametrize("depth", range(4))
def test_a_relative_data_dir_is_found_beside_the_run_that_recorded_it(tmp_path, monkeypatch, depth):
    project = tmp_path / "project"
    for name in ("cat", "dog"):
        (project / "photos" / name).mkdir(parents=True)
        for i in range(3):
            Image.fromarray(np.full((9, 9, 3), 40 * i, dtype=np.uint8)).save(project / "photos" / name / f"{i}.png")
    # the run folder is named like the data folder, and nested `depth` deep: neither misleads the search
    run = project / "runs" / Path(*[f"d{i}" for i in range(depth)]) / "photos" / "best"
    run.mkdir(parents=True)
    model = vitlab.create_model("vit-digits", num_classes=2, depth=1, embed_dim=16, num_heads=2)
    data = DataConfig((8, 8), 1, (0.0,), (1.0,), ["cat", "dog"], dataset="folder", data_dir="photos")
    save_checkpoint(model, run / "model.safetensors", "classifier", data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the caller's folder has no photos
    _, loaded = load_model(run / "model.safetensors", 0)
    assert recorded_folder(loaded) == (project / "photos").resolve()
    assert recorded_folder(replace(loaded, data=replace(data, data_dir="nowhere"))) is None
