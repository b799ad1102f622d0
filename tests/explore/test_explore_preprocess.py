"""The explorer reads a picture as the model's own library would: a model that records a resize and centre
crop (a timm or Hugging Face model) gets its Preprocess, a vitlab model the squash it was trained with."""

import numpy as np
import torch
from PIL import Image

from vitlab.data.preprocess import Preprocess
from vitlab.explore.images import fit_image


def picture() -> torch.Tensor:
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(60, 90, 3), dtype=np.uint8)
    return torch.from_numpy(pixels).permute(2, 0, 1)[None].float() / 255


def test_a_recorded_crop_is_the_models_own_reading():
    image = picture()
    timm_like = Preprocess(image_size=(32, 32), crop_mode="center", crop_pct=0.875, interpolation="bicubic")
    pil = Image.fromarray((image[0] * 255).round().to(torch.uint8).permute(1, 2, 0).numpy())
    expected = timm_like.eval_image(pil).float() / 255
    assert torch.equal(fit_image(image, 3, (32, 32), timm_like)[0], expected)


def test_vitlabs_own_squash_keeps_the_explorers_resize():
    image = picture()
    assert torch.equal(fit_image(image, 3, (32, 32), Preprocess(image_size=(32, 32))), fit_image(image, 3, (32, 32)))


def test_a_model_with_more_outputs_than_class_names_names_each_output(tmp_path):
    import warnings

    import vitlab
    from vitlab.explore.checkpoints import load_model
    from vitlab.runs import DataConfig, save_checkpoint

    model = vitlab.create_model("vit-digits", num_classes=12, depth=1, embed_dim=16, num_heads=2)
    data = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)])
    save_checkpoint(model, tmp_path / "model.safetensors", "classifier", data)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        entry = load_model(tmp_path / "model.safetensors", 0)
    assert entry.classes == [str(i) for i in range(12)]
