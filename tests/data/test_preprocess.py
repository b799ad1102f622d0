"""Preprocess: vitlab's first pipeline bit for bit, timm's eval transform pixel for pixel, Hugging Face image
processors to float precision, RandomResizedCrop by torchvision's rule from a generator, and its validation."""

import io
import itertools

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.transforms import InterpolationMode, RandomResizedCrop
from torchvision.transforms import functional as TF

from vitlab.data.image import decode_image, read_image
from vitlab.data.preprocess import CROP_MODES, Preprocess, random_resized_crop_params
from vitlab.errors import ConfigError

SIZES = [(260, 180), (180, 260), (224, 224), (97, 333), (301, 300), (223, 225)]  # (W, H), odd margins included


def photo(width: int, height: int, seed: int, fmt: str = "JPEG", mode: str = "RGB") -> Image.Image:
    """A decoded photo-like image: smooth gradients, edges and noise, through a real encoder."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width]
    pixels = np.stack([(xx * (seed + 2) + yy) % 256, (yy * 3 + 40 * seed) % 256, ((xx + yy) * 2) % 256], -1)
    pixels = (pixels + rng.normal(0, 25, pixels.shape)).clip(0, 255).astype(np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).convert(mode).save(buffer, fmt)
    buffer.seek(0)
    return Image.open(buffer)


@pytest.fixture(scope="module")
def photos() -> list[Image.Image]:
    return [photo(w, h, i) for i, (w, h) in enumerate(SIZES)]


@pytest.mark.parametrize("channels, size", [(3, 32), (1, 32), (3, 8), (1, 28), (3, 45)])
def test_the_default_is_read_image_bit_for_bit(tmp_path, channels, size):
    for i, (w, h) in enumerate([(260, 180), (31, 33), (32, 32), (8, 8)]):
        for fmt, mode in (("PNG", "RGB"), ("JPEG", "RGB"), ("PNG", "L"), ("PNG", "RGBA")):
            path = tmp_path / f"{i}-{mode}.{fmt.lower()}"
            photo(w, h, i, fmt, mode).save(path)
            pixels = Preprocess(image_size=(size, size), channels=channels).eval_image(decode_image(path))
            assert pixels.dtype == torch.uint8 and pixels.shape == (channels, size, size)
            assert torch.equal(pixels.float() / 255, read_image(path, channels, size)), (path, channels, size)


@pytest.mark.parametrize("crop_mode", CROP_MODES)
def test_eval_image_is_timms_eval_transform_pixel_for_pixel(photos, crop_mode):
    transforms_factory = pytest.importorskip("timm.data.transforms_factory")
    mean, std = (0.3, 0.45, 0.6), (0.2, 0.25, 0.3)
    for size, crop_pct, interpolation in itertools.product(
        [(224, 224), (160, 192), (33, 31)], [1.0, 0.9, 0.875, 1.15], ["bicubic", "bilinear", "lanczos", "nearest"]
    ):
        timm = transforms_factory.transforms_imagenet_eval(
            size, crop_pct=crop_pct, crop_mode=crop_mode, interpolation=interpolation, mean=mean, normalize=False
        )
        ours = Preprocess(size, 3, crop_pct, crop_mode, interpolation, mean, std)
        for image in photos:
            expected = timm(image.convert("RGB"))
            assert torch.equal(ours.eval_image(image), expected), (size, crop_pct, crop_mode, interpolation, image.size)


def test_from_timm_reads_pretrained_cfg_as_resolve_data_config_does(photos):
    timm_data = pytest.importorskip("timm.data")
    cfgs = [
        {},
        {"input_size": (3, 96, 128), "interpolation": "bilinear", "crop_pct": 0.95, "crop_mode": "squash"},
        {"input_size": (3, 64, 64), "crop_pct": 1.0, "mean": (0.5,) * 3, "std": (0.5,) * 3, "crop_mode": "border"},
        {"input_size": (3, 80, 80), "interpolation": "bicubic", "crop_pct": 0.9, "mean": (0.1, 0.2, 0.3)},
    ]
    for cfg in cfgs:
        resolved = timm_data.resolve_data_config(pretrained_cfg={"architecture": "x", **cfg})
        ours = Preprocess.from_timm(cfg)
        assert (ours.channels, *ours.image_size) == tuple(resolved["input_size"])
        assert (ours.interpolation, ours.crop_pct, ours.crop_mode) == (
            resolved["interpolation"],
            resolved["crop_pct"],
            resolved["crop_mode"],
        )
        assert ours.mean == tuple(resolved["mean"]) and ours.std == tuple(resolved["std"])
        transform = timm_data.create_transform(**resolved)
        for image in photos[:3]:
            assert torch.allclose(ours.normalize(ours.eval_image(image)), transform(image.convert("RGB")), atol=1e-6)
        timm_keys = {k: v for k, v in ours.to_timm().items()}
        assert Preprocess.from_timm(timm_keys) == ours
    with pytest.raises(ConfigError, match="interpolation='random'"):
        Preprocess.from_timm({"interpolation": "random"})


def test_random_resized_crop_params_follow_torchvisions_rule():
    for seed, (height, width), scale, ratio in itertools.product(
        range(20), [(180, 260), (300, 40)], [(0.08, 1.0), (0.9, 1.0)], [(3 / 4, 4 / 3), (5.0, 6.0)]
    ):
        torch.manual_seed(seed)  # torchvision draws from the global generator; ours from the one given
        expected = RandomResizedCrop.get_params(torch.empty(3, height, width), list(scale), list(ratio))
        got = random_resized_crop_params(height, width, scale, ratio, torch.Generator().manual_seed(seed))
        assert got == tuple(expected), (seed, height, width, scale, ratio)


def test_train_image_is_resized_crop_then_flip_from_the_generator(photos):
    image = photos[0]
    for backend in ("pil", "tensor"):
        pre = Preprocess((48, 40), interpolation="bicubic", resize_backend=backend)
        flips = set()
        for seed in range(8):
            out = pre.train_image(image, torch.Generator().manual_seed(seed))
            assert out.dtype == torch.uint8 and out.shape == (3, 48, 40)
            assert torch.equal(out, pre.train_image(image, torch.Generator().manual_seed(seed)))  # per sample
            generator = torch.Generator().manual_seed(seed)
            top, left, h, w = random_resized_crop_params(
                image.height, image.width, (0.08, 1.0), (3 / 4, 4 / 3), generator
            )
            flip = torch.rand(1, generator=generator).item() < 0.5
            flips.add(flip)
            if backend == "pil":
                crop = TF.resized_crop(image, top, left, h, w, [48, 40], InterpolationMode.BICUBIC)
                expected = torch.from_numpy(np.array(crop)).permute(2, 0, 1)
                assert torch.equal(out, expected.flip(-1) if flip else expected)
            unflipped = pre.train_image(image, torch.Generator().manual_seed(seed), hflip=False)
            assert torch.equal(out, unflipped.flip(-1) if flip else unflipped)
        assert flips == {True, False}
    grey = Preprocess((16, 16), channels=1).train_image(image, torch.Generator().manual_seed(0))
    assert grey.shape == (1, 16, 16)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["torchvision", "pil"])
def test_from_hf_equals_what_transformers_computes(photos, backend):
    transformers = pytest.importorskip("transformers")
    from transformers.models.convnext.image_processing_pil_convnext import ConvNextImageProcessorPil
    from transformers.models.deit.image_processing_pil_deit import DeiTImageProcessorPil
    from transformers.models.vit.image_processing_pil_vit import ViTImageProcessorPil

    classes = {
        "torchvision": (
            transformers.ViTImageProcessor,
            transformers.DeiTImageProcessor,
            transformers.ConvNextImageProcessor,
        ),
        "pil": (ViTImageProcessorPil, DeiTImageProcessorPil, ConvNextImageProcessorPil),
    }[backend]
    vit, deit, convnext = classes
    cases = [
        (vit, {}),
        (vit, {"resample": 3, "image_mean": [0.1, 0.2, 0.3], "image_std": [0.3, 0.2, 0.1]}),
        (vit, {"resample": 0, "size": {"height": 200, "width": 160}}),
        (vit, {"do_rescale": False}),
        (vit, {"do_normalize": False}),
        (deit, {}),
        (deit, {"size": {"height": 259, "width": 259}}),  # an odd margin: transformers floors it
        (deit, {"size": {"shortest_edge": 257}}),
        (convnext, {"size": {"shortest_edge": 224}}),
        (convnext, {"size": {"shortest_edge": 384}}),
    ]
    for cls, kwargs in cases:
        processor = cls(**kwargs)
        ours = Preprocess.from_hf(processor.to_dict(), backend=backend)
        for image in photos:
            expected = processor(images=image, return_tensors="pt")["pixel_values"][0]
            got = ours.normalize(ours.eval_image(image))
            assert got.shape == expected.shape
            torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-5, msg=f"{cls.__name__} {kwargs}")


@pytest.mark.parametrize(
    "processor, words",
    [
        ({"do_resize": False}, "do_resize"),
        ({"size": {"shortest_edge": 224}}, "shortest_edge"),
        ({"size": {"longest_edge": 224}}, "size"),
        ({"size": {"height": 200, "width": 200}, "do_center_crop": True, "crop_size": 224}, "crop_size"),
        ({"size": {"height": 256, "width": 320}, "do_center_crop": True, "crop_size": 224}, "one crop_pct"),
        ({"resample": 7}, "resample"),
        ({"image_mean": [0.5, 0.5], "image_std": [0.5, 0.5]}, "mean"),
    ],
)
def test_from_hf_refuses_what_it_cannot_express(processor, words):
    with pytest.raises(ConfigError, match=words):
        Preprocess.from_hf(processor)


def test_from_hf_reads_size_crop_and_rescale():
    deit = Preprocess.from_hf(
        {"image_processor_type": "DeiTImageProcessor", "size": 256, "crop_size": 224, "do_center_crop": True}
    )
    assert (deit.image_size, deit.crop_mode, deit.scale_size, deit.interpolation) == (
        (224, 224),
        "squash",
        (256, 256),
        "bicubic",
    )
    assert (deit.resize_backend, deit.crop_rounding) == ("tensor", "floor")
    raw = Preprocess.from_hf({"do_rescale": False, "image_mean": [127.5] * 3, "image_std": [127.5] * 3})
    assert raw.mean == pytest.approx((0.5,) * 3) and raw.std == pytest.approx((0.5,) * 3)
    assert Preprocess.from_hf({}, backend="pil").resize_backend == "pil"
    old_deit = {"feature_extractor_type": "DeiTFeatureExtractor", "size": 256, "crop_size": 224, "do_center_crop": True}
    assert Preprocess.from_hf(old_deit) == deit  # a file written before image processors: DeiT's defaults
    grey = Preprocess.from_hf({}, channels=1)
    assert grey.channels == 1 and grey.mean == (0.5,)


@pytest.mark.parametrize(
    "fields, name",
    [
        ({"image_size": 0}, "image_size"),
        ({"image_size": (224, 224, 3)}, "image_size"),
        ({"channels": 2}, "channels"),
        ({"crop_pct": 0.0}, "crop_pct"),
        ({"crop_pct": 3.0}, "crop_pct"),
        ({"crop_mode": "zoom"}, "crop_mode"),
        ({"interpolation": "cubic"}, "interpolation"),
        ({"mean": (0.5,) * 3}, "std"),
        ({"mean": (0.5, 0.5), "std": (0.5, 0.5)}, "mean"),
        ({"mean": (0.5,) * 3, "std": (0.5, 0.0, 0.5)}, "std"),
        ({"resize_backend": "cv2"}, "resize_backend"),
        ({"crop_rounding": "ceil"}, "crop_rounding"),
        ({"resize_backend": "tensor", "interpolation": "box"}, "interpolation"),
    ],
)
def test_bad_fields_are_one_config_error_naming_the_field(fields, name):
    with pytest.raises(ConfigError, match=f"preprocess {name}=") as err:
        Preprocess(**fields)
    assert "\n" not in str(err.value)


def test_dict_round_trip_and_unknown_keys():
    pre = Preprocess(224, 3, 0.9, "center", "bicubic", (0.5,) * 3, (0.5,) * 3, "tensor", "floor")
    assert pre.image_size == (224, 224) and Preprocess.from_dict(pre.to_dict()) == pre
    assert Preprocess.from_dict(Preprocess().to_dict()) == Preprocess()
    assert Preprocess(mean=[0.5], std=[0.25]).mean == (0.5,) * 3  # one value for every channel
    with pytest.raises(ConfigError, match="crop_size"):
        Preprocess.from_dict({"crop_size": 3})


def test_border_pads_with_the_mean_and_center_keeps_the_aspect():
    wide = Image.new("RGB", (200, 100), (255, 0, 0))
    border = Preprocess((64, 64), crop_mode="border", mean=(0.0, 1.0, 0.2), std=(1.0,) * 3).eval_image(wide)
    assert border[:, 0, 32].tolist() == [0, 255, 51] and border[:, 32, 32].tolist() == [255, 0, 0]
    center = Preprocess((64, 64), crop_mode="center").eval_image(wide)
    assert center.shape == (3, 64, 64) and (center == torch.tensor([255, 0, 0]).view(3, 1, 1)).all()
