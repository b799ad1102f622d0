"""An export carries the model's own preprocessing into each target's format exactly, or is refused naming why.

A model fine-tuned from a timm hub id (centre crop, bicubic, its own mean/std) exported to ONNX, timm and Hugging
Face gives the run's own ``vitlab predict`` probabilities through each library's own pipeline: onnxruntime fed
as the graph's metadata says, timm's ``resolve_data_config`` + ``create_transform``, transformers'
``AutoImageProcessor``; and vitlab reads each export back with the run's own preprocessing. Generated data configs
(sizes, crops, filters, statistics, both libraries' conventions) go through the timm and Hugging Face exports the
same way: each is exact or refused in one line."""

import json
import random
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data.preprocess import Preprocess
from vitlab.errors import ConfigError
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint

CLASSES = ("ant", "bee", "cat")
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


def photos(folder, count: int, seed: int) -> list:
    """``count`` RGB photos of odd, non-square sizes (odd crop margins among them)."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(count):
        height, width = (int(v) for v in rng.integers(37, 91, size=2))
        Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8)).save(folder / f"{i}.png")
        files.append(folder / f"{i}.png")
    return files


def timm_probs(folder, files) -> np.ndarray:
    """Probabilities of the timm folder export through timm's own model and pipeline."""
    import timm

    model = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    with torch.no_grad():
        return model(torch.stack([transform(Image.open(f).convert("RGB")) for f in files])).softmax(-1).numpy()


def hf_probs(folder, files) -> np.ndarray:
    """Probabilities of the Hugging Face folder export through transformers' own image processor and model."""
    import transformers

    processor = transformers.AutoImageProcessor.from_pretrained(folder)
    model = transformers.AutoModelForImageClassification.from_pretrained(folder).eval()
    inputs = processor([Image.open(f).convert("RGB") for f in files], return_tensors="pt")
    with torch.no_grad():
        return model(**inputs).logits.softmax(-1).numpy()


@pytest.fixture
def tuned_run(hub_cache, hue_photos, tmp_path):
    """A run fine-tuned for one epoch from a cached timm id whose preprocessing is not vitlab's default."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=3, depth=1).eval()
    model.pretrained_cfg = {
        **model.pretrained_cfg,
        "interpolation": "bicubic",
        "crop_pct": 0.875,
        "crop_mode": "center",
        "mean": (0.42, 0.47, 0.52),
        "std": (0.21, 0.23, 0.26),
    }
    save_for_hf(model, tmp_path / "push", model_config={"label_names": list(CLASSES)}, safe_serialization=True)
    hub_cache(TIMM_ID, tmp_path / "push")
    hue_photos(tmp_path / "data", 3, seed=1, sides=(40, 70), classes=CLASSES)
    run = tmp_path / "tuned"
    argv = ["train", "--init", TIMM_ID, "--dataset", "folder", "--data-dir", str(tmp_path / "data")]
    argv += ["--image-size", "32", "--epochs", "1", "--batch-size", "4", "--device", "cpu", "--out", str(run)]
    assert main(argv) == 0
    return run


@pytest.mark.slow
def test_a_fine_tuned_hub_models_exports_give_its_probabilities_in_each_library(tuned_run, tmp_path, capsys):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    pytest.importorskip("transformers")
    import timm

    run = load_checkpoint(tuned_run)
    assert (run.data.interpolation, run.data.crop_pct, run.data.crop_mode) == ("bicubic", 0.875, "center")
    files = photos(tmp_path / "photos", 4, seed=3)
    capsys.readouterr()
    assert main(["predict", str(tuned_run), *map(str, files), "--json", "--top-k", "3", "--device", "cpu"]) == 0
    predicted = json.loads(capsys.readouterr().out)
    expected = np.array([[{t["class"]: t["probability"] for t in p["top"]}[c] for c in CLASSES] for p in predicted])

    for target in ("onnx", "timm", "hf"):
        out = tmp_path / ("model.onnx" if target == "onnx" else target)
        assert main(["export", str(tuned_run), "--to", target, "--out", str(out)]) == 0
    assert np.abs(timm_probs(tmp_path / "timm", files) - expected).max() <= 1e-5
    assert np.abs(hf_probs(tmp_path / "hf", files) - expected).max() <= 1e-5
    for folder in ("timm", "hf"):  # vitlab reads each back with the run's own preprocessing
        assert load_checkpoint(tmp_path / folder).data.preprocess() == run.data.preprocess(), folder

    import onnx

    props = {p.key: json.loads(p.value) for p in onnx.load(str(tmp_path / "model.onnx")).metadata_props}
    assert Preprocess.from_dict(props["vitlab.preprocess"]) == run.data.preprocess()
    transform = timm.data.create_transform(**timm.data.resolve_data_config(pretrained_cfg=props["pretrained_cfg"]))
    pixels = torch.stack([transform(Image.open(f).convert("RGB")) for f in files]).numpy()
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    logits = torch.from_numpy(session.run(["logits"], {"images": pixels})[0])
    assert np.abs(logits.softmax(-1).numpy() - expected).max() <= 1e-5


def pipeline(pre: Preprocess) -> tuple:
    """What decides a preprocessing's pixels: everything but how ``crop_pct`` spells the resize size."""
    return replace(pre, crop_pct=1.0), pre.scale_size


def generated_data(rng: random.Random) -> DataConfig:
    """A classifier's data config drawn from everything a run can record: size, crop mode and fraction, filter,
    statistics, and timm's or transformers' resampling conventions."""
    side = rng.choice((32, 48))
    size = (side, rng.choice((side, 32, 48)))
    tensor = rng.random() < 0.4
    filters = ("nearest", "bilinear", "bicubic") if tensor else ("nearest", "bilinear", "bicubic", "lanczos", "box")
    mean = tuple(round(rng.uniform(0.2, 0.7), 3) for _ in range(3))
    std = tuple(round(rng.uniform(0.1, 0.4), 3) for _ in range(3))
    pre = Preprocess(
        image_size=size,
        crop_pct=rng.choice((1.0, 0.875, 0.9, round(rng.uniform(0.6, 1.0), 3))),
        crop_mode=rng.choice(("center", "squash", "border")),
        interpolation=rng.choice(filters),
        mean=mean,
        std=std,
        resize_backend="tensor" if tensor else "pil",
        crop_rounding="floor" if tensor else "round",
    )
    return DataConfig(size, 3, mean, std, list(CLASSES)).with_preprocess(pre)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(8))
def test_generated_preprocessing_exports_exactly_or_is_refused(seed, tmp_path, capsys):
    pytest.importorskip("timm")
    pytest.importorskip("transformers")
    rng = random.Random(seed)
    data = generated_data(rng)
    torch.manual_seed(seed)
    config = ViTConfig(img_size=data.image_size, patch_size=16, embed_dim=32, depth=1, num_heads=2, num_classes=3)
    model = VisionTransformer(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    source = save_checkpoint(model, tmp_path / "model.safetensors", "classifier", data)
    files = photos(tmp_path / "photos", 3, seed=seed)
    transform = data.eval_transform()
    with torch.no_grad():
        expected = model(torch.stack([transform(data.load_image(f)) for f in files])).softmax(-1).numpy()
    for target, probs in (("timm", timm_probs), ("hf", hf_probs)):
        try:
            data.exact_in(target)
        except ConfigError as refused:
            assert main(["export", str(source), "--to", target, "--out", str(tmp_path / target)]) == 2
            line = capsys.readouterr().err.strip()
            assert "\n" not in line and str(refused).split(":")[0] in line
            continue
        assert main(["export", str(source), "--to", target, "--out", str(tmp_path / target)]) == 0
        assert np.abs(probs(tmp_path / target, files) - expected).max() <= 1e-5, (target, data.preprocess())
        assert pipeline(load_checkpoint(tmp_path / target).data.preprocess()) == pipeline(data.preprocess()), target
