"""Hub model ids through load_checkpoint, from a local Hugging Face cache built here (no network): a timm
model's logits equal timm's own eval pipeline, a transformers model's equal its image processor's, and an id
that is not cached is one line."""

import io
import json
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

import vitlab
from vitlab.cli.main import main
from vitlab.errors import CheckpointError
from vitlab.runs import hub

PHOTO_SIZES = [(180, 260), (260, 180), (224, 224), (300, 200), (97, 333), (333, 97), (640, 480), (225, 223)]
PHOTO_SIZES += [(64, 64), (512, 384), (250, 251), (199, 300)]
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


def photos() -> list[Image.Image]:
    """12 decoded JPEG photos of mixed sizes (non-square among them)."""
    images: list[Image.Image] = []
    for seed, (width, height) in enumerate(PHOTO_SIZES):
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:height, 0:width]
        pixels = np.stack([(xx * (seed + 2) + yy) % 256, (yy * 3 + 40 * seed) % 256, ((xx - yy) * 2) % 256], -1)
        pixels = (pixels + rng.normal(0, 30, pixels.shape)).clip(0, 255).astype(np.uint8)
        buffer = io.BytesIO()
        Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
        buffer.seek(0)
        images.append(Image.open(buffer))
    return images


def perturbed(module: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """Weights off their initialisation (a zero or tiny head would give ties), in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    return module.eval()


def test_hub_ids_are_told_from_paths(tmp_path, monkeypatch):
    assert hub.parse_hub_id(TIMM_ID) == (TIMM_ID, None)
    assert hub.parse_hub_id("hf-hub:" + TIMM_ID) == (TIMM_ID, None)
    assert hub.parse_hub_id("google/vit-base-patch16-224@refs/pr/1") == ("google/vit-base-patch16-224", "refs/pr/1")
    for path in ("runs/a/best", "./org/name", "/org/name", "org/model.safetensors", "org/w.pth", "name", "a--b/c"):
        assert hub.parse_hub_id(path) is None, path
    monkeypatch.chdir(tmp_path)
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert not hub.is_hub_id("org/name") and hub.is_hub_id("org/other") and hub.is_hub_id("hf-hub:org/name")


def timm_model(crop_mode: str) -> Any:
    """A random timm ViT-Tiny (2 blocks, 5 classes) whose pretrained_cfg is not ImageNet's."""
    timm = pytest.importorskip("timm")
    model: Any = perturbed(timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=5, depth=2))
    model.pretrained_cfg = {
        **model.pretrained_cfg,
        "interpolation": "bicubic",
        "crop_pct": 0.9,
        "crop_mode": crop_mode,
        "mean": (0.42, 0.47, 0.52),
        "std": (0.21, 0.23, 0.26),
    }
    return model


@pytest.mark.slow
@pytest.mark.parametrize("crop_mode", ["center", "squash", "border"])
def test_timm_hub_model_scores_as_timms_own_pipeline(hub_cache, tmp_path, crop_mode):
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    labels = ["cat", "dog", "fox", "owl", "yak"] if crop_mode == "center" else None
    model = timm_model(crop_mode)
    save_for_hf(
        model, tmp_path / "push", model_config={"label_names": labels} if labels else None, safe_serialization=True
    )
    assert json.loads((tmp_path / "push" / "config.json").read_text())["pretrained_cfg"]["crop_mode"] == crop_mode
    hub_cache(TIMM_ID, tmp_path / "push")

    loaded = vitlab.load_checkpoint(TIMM_ID)
    assert loaded.metadata == {"source": "timm", "source_id": TIMM_ID}
    assert loaded.guessed.keys() == {"num_heads"} and loaded.model.config.num_heads == 3  # vit_tiny's
    data = loaded.data
    assert (data.interpolation, data.crop_pct, data.crop_mode) == ("bicubic", 0.9, crop_mode)
    assert data.mean == (0.42, 0.47, 0.52) and data.std == (0.21, 0.23, 0.26)
    assert data.classes == (labels or ["0", "1", "2", "3", "4"])
    assert loaded.model.pretrained_cfg["crop_mode"] == crop_mode  # and said back the way timm reads it

    images = photos()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    pre = data.preprocess()
    with torch.no_grad():
        expected = model(torch.stack([transform(image.convert("RGB")) for image in images]))
        got = loaded.model(torch.stack([pre.normalize(pre.eval_image(image)) for image in images]))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)
    assert torch.equal(got.argmax(-1), expected.argmax(-1))
    assert vitlab.load_checkpoint("hf-hub:" + TIMM_ID).metadata["source_id"] == "hf-hub:" + TIMM_ID


def hf_processors(transformers) -> dict[str, object]:
    return {
        "google/vit-tiny-test": transformers.ViTImageProcessor(
            size={"height": 64, "width": 64}, image_mean=[0.45, 0.5, 0.55], image_std=[0.22, 0.25, 0.2]
        ),
        "google/deit-tiny-test": transformers.DeiTImageProcessor(
            size={"height": 73, "width": 73}, crop_size={"height": 64, "width": 64}
        ),
        "google/vit-shortest-edge-test": transformers.ViTImageProcessor(
            size={"shortest_edge": 72}, do_center_crop=True, crop_size={"height": 64, "width": 64}, resample=3
        ),
    }


@pytest.mark.slow
@pytest.mark.parametrize("repo", ["google/vit-tiny-test", "google/deit-tiny-test", "google/vit-shortest-edge-test"])
def test_transformers_hub_model_scores_as_its_image_processor(hub_cache, tmp_path, repo):
    transformers = pytest.importorskip("transformers")
    labels = {i: name for i, name in enumerate(["ant", "bee", "cow", "doe", "eel"])}
    config = transformers.ViTConfig(
        image_size=64,
        patch_size=16,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        id2label=labels,
        label2id={v: k for k, v in labels.items()},
    )
    torch.manual_seed(0)
    model = perturbed(transformers.ViTForImageClassification(config))
    model.save_pretrained(tmp_path / "push")
    hf_processors(transformers)[repo].save_pretrained(tmp_path / "push")
    snapshot = hub_cache(repo, tmp_path / "push")

    loaded = vitlab.load_checkpoint(repo)
    assert loaded.metadata == {"source": "hf", "source_id": repo} and loaded.guessed == {}
    assert loaded.data.classes == list(labels.values())
    processor = transformers.AutoImageProcessor.from_pretrained(snapshot)  # what the pipeline loads
    images = photos()
    pre = loaded.data.preprocess()
    with torch.no_grad():
        expected = model(**processor(images=images, return_tensors="pt")).logits
        got = loaded.model(torch.stack([pre.normalize(pre.eval_image(image)) for image in images]))
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-4)
    assert torch.equal(got.argmax(-1), expected.argmax(-1))
    classify = transformers.pipeline("image-classification", model=model, image_processor=processor, device="cpu")
    tops = [result[0]["label"] for result in classify(images, top_k=1)]
    assert tops == [loaded.data.classes[i] for i in got.argmax(-1).tolist()]


def test_an_id_not_cached_offline_is_one_line(hub_cache, capsys):
    with pytest.raises(CheckpointError, match="timm/does-not-exist.*HF_HUB_OFFLINE.*hf download timm/does-not-exist"):
        vitlab.load_checkpoint("timm/does-not-exist")
    assert main(["evaluate", "timm/does-not-exist"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "timm/does-not-exist" in err and "Traceback" not in err


def test_an_id_not_cached_without_a_network_is_one_line(hub_cache, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "_endpoint_reachable", lambda timeout=3.0: False)
    with pytest.raises(CheckpointError, match="org/missing.*cannot be reached.*hf download org/missing") as err:
        vitlab.load_checkpoint("org/missing")
    assert "\n" not in str(err.value)


def test_a_cached_repo_without_weights_is_not_a_model(hub_cache, tmp_path):
    (tmp_path / "push").mkdir()
    (tmp_path / "push" / "config.json").write_text(json.dumps({"architecture": "vit_tiny_patch16_224"}))
    hub_cache("timm/vit_tiny_patch16_224.x", tmp_path / "push")
    with pytest.raises(CheckpointError, match="not in the Hugging Face cache"):
        vitlab.load_checkpoint("timm/vit_tiny_patch16_224.x")


@pytest.mark.parametrize(
    "name",
    [
        "vit_tiny_patch16_224",
        "vit_small_patch16_224",
        "vit_base_patch16_224",
        "vit_base_patch16_gap_224",  # the one base with 16 heads
        "vit_base_patch16_plus_240",
        "vit_medium_patch16_gap_256",
        "vit_large_patch16_224",
        "vit_huge_patch14_224",
        "vit_giant_patch14_224",
        "vit_giant_patch14_dinov2",
        "vit_betwixt_patch16_reg4_gap_256",
        "deit_tiny_patch16_224",
        "deit3_medium_patch16_224",
        "vit_small_r26_s32_224",
    ],
)
def test_heads_by_architecture_are_timms(name):
    timm = pytest.importorskip("timm")
    from vitlab.interop.timm.config import timm_heads

    with torch.device("meta"):  # timm's own definition, no memory
        module = timm.create_model(name, pretrained=False)
    assert timm_heads(f"{name}.some_tag", module.embed_dim) == module.blocks[0].attn.num_heads
    assert timm_heads(name, module.embed_dim + 8) is None  # a width its family does not define: no guess
