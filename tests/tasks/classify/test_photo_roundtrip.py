"""The practitioner's round trip on generated photos, from the command line: a timm model id from a local
hub cache is evaluated on ``photos/val`` exactly as timm's own pipeline scores it, fine-tuned with
``--recipe finetune`` on ``photos/train`` (streamed), asked to predict a JPEG, and exported to ONNX, whose
graph fed with the recorded preprocessing gives the same top-1."""

import json

import pytest
import torch
from PIL import Image

from vitlab import load_checkpoint
from vitlab.cli.main import main
from vitlab.data.image import decode_image

CLASSES = ("ant", "bee", "cat")
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


@pytest.fixture
def timm_id(hub_cache, tmp_path):
    """A random-init timm ViT (3 classes, depth 2) with its own preprocessing, cached as ``TIMM_ID``."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=len(CLASSES), depth=2).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.pretrained_cfg = {
        **model.pretrained_cfg,
        "interpolation": "bicubic",
        "crop_pct": 0.9,
        "crop_mode": "center",
        "mean": (0.42, 0.47, 0.52),
        "std": (0.21, 0.23, 0.26),
    }
    save_for_hf(model, tmp_path / "push", model_config={"label_names": list(CLASSES)}, safe_serialization=True)
    hub_cache(TIMM_ID, tmp_path / "push")
    return model


def timm_scores(model, folder) -> tuple[float, float]:
    """Accuracy and mean NLL of ``model`` on ``folder/CLASS/*.jpg`` through timm's own eval pipeline."""
    import timm

    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=model))
    files = sorted(folder.glob("*/*.jpg"))
    labels = torch.tensor([CLASSES.index(f.parent.name) for f in files])
    with torch.no_grad():
        logits = model(torch.stack([transform(Image.open(f).convert("RGB")) for f in files]))
    nll = torch.nn.functional.cross_entropy(logits, labels).item()
    return (logits.argmax(-1) == labels).float().mean().item(), nll


@pytest.mark.slow
def test_a_timm_id_evaluates_finetunes_predicts_and_exports(timm_id, hue_photos, tmp_path, capsys):
    photos = tmp_path / "photos"
    hue_photos(photos / "train", 8, seed=1)
    hue_photos(photos / "val", 4, seed=2)

    report = tmp_path / "timm-eval"
    argv = ["evaluate", TIMM_ID, "--dataset", "folder", "--data-dir", str(photos), "--split", "val"]
    assert main([*argv, "--device", "cpu", "--out", str(report)]) == 0
    metrics = json.loads((report / "metrics.json").read_text())
    accuracy, nll = timm_scores(timm_id, photos / "val")
    assert metrics["n"] == 12 and metrics["accuracy"] == pytest.approx(accuracy, abs=1e-9)
    assert metrics["nll"] == pytest.approx(nll, abs=1e-4)  # the logits are timm's to float precision

    run = tmp_path / "tuned"
    argv = ["train", "--init", TIMM_ID, "--recipe", "finetune", "--dataset", "folder", "--data-dir", str(photos)]
    argv += ["--loader", "stream", "--epochs", "1", "--batch-size", "8", "--device", "cpu", "--out", str(run)]
    assert main([*argv, "--set", "data.workers=1"]) == 0
    config = json.loads((run / "config.json").read_text())
    assert config["model"] == "init" and config["recipe"] == "finetune" and config["layer_decay"] == 0.75
    tuned = load_checkpoint(run)
    data = tuned.data
    assert tuple(data.image_size) == (224, 224) and data.classes == list(CLASSES)
    assert (data.interpolation, data.crop_pct, data.crop_mode) == ("bicubic", 0.9, "center")
    assert data.mean == pytest.approx((0.42, 0.47, 0.52)) and data.std == pytest.approx((0.21, 0.23, 0.26))
    assert tuned.model.config.num_heads == 3 and tuned.model.config.depth == 2

    image = photos / "val" / "bee" / "000.jpg"
    capsys.readouterr()
    assert main(["predict", str(run), str(image), "--json", "--top-k", "1", "--device", "cpu"]) == 0
    predicted = json.loads(capsys.readouterr().out)[0]["top"][0]["class"]

    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    onnx_file = tmp_path / "tuned.onnx"
    assert main(["export", str(run), "--to", "onnx", "--out", str(onnx_file)]) == 0
    assert "bicubic" in capsys.readouterr().out  # the export says how to feed the graph
    pre = data.preprocess()
    pixels = pre.normalize(pre.eval_image(decode_image(image)))[None].numpy()
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    logits = session.run(None, {session.get_inputs()[0].name: pixels})[0]
    assert CLASSES[int(logits.argmax(-1)[0])] == predicted
