"""DataConfig, the one owner of "pixels -> model input": its eval transform is timm's create_transform
bit for bit, its normalisation torchvision's, its Hugging Face processor transformers' own pixels (or a
refusal naming why), and the user's overrides apply once."""

import io
import json

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import functional as TF

from vitlab.data import DataConfig, DataOptions
from vitlab.data.preprocess import Statistics, normalize
from vitlab.errors import ConfigError, DataError

SIZES = [(260, 180), (180, 260), (224, 224), (97, 333), (301, 300)]  # (W, H)


def photo(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    pixels = np.stack([(xx * (seed + 2) + yy) % 256, (yy * 3 + 40 * seed) % 256, ((xx + yy) * 2) % 256], -1)
    pixels = (pixels + rng.normal(0, 25, pixels.shape)).clip(0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG")
    buffer.seek(0)
    return Image.open(buffer).convert("RGB")


def config(**fields) -> DataConfig:
    base = dict(image_size=(64, 64), in_chans=3, mean=(0.42, 0.47, 0.52), std=(0.21, 0.23, 0.26))
    return DataConfig(**{**base, "classes": ["a", "b"], **fields})


def test_normalize_is_torchvisions_for_uint8_float_and_in_place():
    pixels = torch.randint(0, 256, (4, 3, 5, 5), dtype=torch.uint8)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    expected = TF.normalize(pixels.float() / 255, list(mean), list(std))
    assert torch.equal(normalize(pixels.float() / 255, mean, std), expected)
    assert torch.equal(Statistics(mean, std).normalize(pixels), expected)
    assert torch.equal(Statistics(mean, std).normalize(pixels.float() / 255, in_place=True), expected)
    data = config(image_size=(5, 5), mean=mean, std=std)
    assert torch.equal(data.normalize(pixels), expected) and torch.equal(data.normalize(pixels[0]), expected[0])
    with pytest.raises(DataError, match="3 means"):
        normalize(torch.rand(2, 1, 4, 4), mean, std)


@pytest.mark.parametrize(
    "geometry",
    [
        dict(crop_mode="center", crop_pct=0.875, interpolation="bicubic"),
        dict(crop_mode="center", crop_pct=0.9, interpolation="bilinear"),
        dict(crop_mode="squash", crop_pct=1.0, interpolation="bicubic"),
        dict(crop_mode="squash", crop_pct=0.875, interpolation="lanczos"),
        dict(crop_mode="border", crop_pct=1.0, interpolation="bicubic"),
    ],
    ids=lambda g: f"{g['crop_mode']}-{g['crop_pct']}-{g['interpolation']}",
)
def test_eval_transform_is_timms_create_transform_bit_for_bit(geometry):
    timm = pytest.importorskip("timm")
    data = config(**geometry)
    transform = timm.data.create_transform(**timm.data.resolve_data_config(data.pretrained_cfg()))
    for k, (width, height) in enumerate(SIZES):
        image = photo(width, height, k)
        assert torch.equal(data.eval_transform()(image), transform(image)), (width, height)


def test_load_image_is_the_image_door_in_the_models_mode(tmp_path):
    path = tmp_path / "deep.png"
    Image.fromarray(np.full((9, 7), 32768, np.uint16)).save(path)  # 16-bit grey: half intensity
    grey = config(in_chans=1, mean=(0.5,), std=(0.25,)).load_image(path)
    assert grey.mode == "L" and np.asarray(grey).max() == 128
    assert config().load_image(path).mode == "RGB"
    with pytest.raises(DataError, match="no such file"):
        config().load_image(tmp_path / "missing.png")


def test_resolve_applies_the_users_overrides_once():
    data = config(crop_mode="center", crop_pct=0.875, interpolation="bicubic")
    assert data.resolve(None) is data and data.resolve(DataOptions()) == data
    given = data.resolve(DataOptions(image_size=48, mean=(0.5, 0.5, 0.5), std=(0.2, 0.2, 0.2)))
    assert (given.image_size, given.mean, given.crop_pct) == ((48, 48), (0.5,) * 3, 0.875)
    assert given.eval_transform()(photo(90, 70, 0)).shape == (3, 48, 48)
    assert config().resolve(DataOptions(channels=1, mean=(0.5,), std=(0.5,))).in_chans == 1


@pytest.mark.parametrize(
    "geometry",
    [
        dict(crop_mode="center", crop_pct=0.875, interpolation="bicubic"),  # a timm model's
        dict(crop_mode="squash", crop_pct=64 / 67, interpolation="bilinear"),  # vitlab's, an odd margin
        dict(crop_mode="border", crop_pct=1.0),
        dict(crop_mode="center", crop_pct=0.875, resize_backend="tensor", crop_rounding="floor"),  # an HF model's
        dict(crop_mode="squash", crop_pct=0.8, interpolation="bicubic", resize_backend="tensor", crop_rounding="floor"),
    ],
    ids=["timm-center", "squash-odd", "border", "hf-center", "hf-squash"],
)
def test_hf_processor_as_transformers_loads_it_gives_the_eval_transforms_pixels(geometry, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("timm")
    data = config(**geometry)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps(data.hf_processor()))
    processor = transformers.AutoImageProcessor.from_pretrained(tmp_path)
    for k, (width, height) in enumerate(SIZES):
        image = photo(width, height, k)
        theirs = processor(images=image, return_tensors="pt")["pixel_values"][0]
        ours = data.eval_transform()(image)
        if data.resize_backend == "pil":  # timm's own transforms
            assert torch.equal(theirs, ours), (width, height)
        else:  # the same pixels; transformers rescales by multiplying with 1/255
            assert (theirs - ours).abs().max() <= 1e-5, (width, height)


@pytest.mark.parametrize(
    "fields, named",
    [
        (dict(crop_mode="center", resize_backend="pil", crop_rounding="floor"), "mixes timm's and transformers'"),
        (dict(crop_mode="border", resize_backend="tensor", crop_rounding="floor"), "pads to keep the aspect"),
        (dict(crop_mode="center", image_size=(64, 48), resize_backend="tensor", crop_rounding="floor"), "non-square"),
        (dict(in_chans=1, mean=(0.5,), std=(0.2,)), "1-channel"),
    ],
)
def test_hf_refuses_what_no_image_processor_reproduces(fields, named):
    with pytest.raises(ConfigError, match=named) as refused:
        config(**fields).hf_processor()
    assert "--to onnx" in str(refused.value) and "\n" not in str(refused.value)


def test_timm_refuses_a_hugging_face_pipeline_and_onnx_takes_all():
    hf_model = config(crop_mode="center", crop_pct=0.875, resize_backend="tensor", crop_rounding="floor")
    with pytest.raises(ConfigError, match="timm's create_transform does not reproduce"):
        hf_model.exact_in("timm")
    hf_model.exact_in("onnx")
    config(crop_mode="border").exact_in("timm")
