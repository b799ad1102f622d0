"""Every command that shows a fine-tuned photo model an image feeds it exactly what training's evaluation
does: ``data.eval_transform()(data.load_image(path))``, compared bit for bit (``torch.equal``) with the
tensor the model received (a forward pre-hook on every VisionTransformer). Exports carry that transform:
timm's own ``resolve_data_config`` + ``create_transform`` on the written ``pretrained_cfg`` gives the same
tensor, transformers' own pipeline the same probabilities."""

import json

import pytest
import torch
from PIL import Image

from vitlab import load_checkpoint
from vitlab.cli.main import main
from vitlab.models.vit import VisionTransformer

CLASSES = ("ant", "bee", "cat")
TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"
SIZE = 64


@pytest.fixture
def finetuned(hub_cache, hue_photos, tmp_path):
    """A run fine-tuned from a timm id whose pipeline is a centre crop 0.875, bicubic, its own mean/std;
    returns ``(run folder, photos folder)``."""
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    torch.manual_seed(0)
    model = timm.create_model(
        "vit_tiny_patch16_224", pretrained=False, num_classes=len(CLASSES), depth=1, img_size=SIZE
    ).eval()
    model.pretrained_cfg = {
        **model.pretrained_cfg,
        "input_size": (3, SIZE, SIZE),
        "interpolation": "bicubic",
        "crop_pct": 0.875,
        "crop_mode": "center",
        "mean": (0.42, 0.47, 0.52),
        "std": (0.21, 0.23, 0.26),
    }
    save_for_hf(
        model,
        tmp_path / "push",
        model_config={"label_names": list(CLASSES)},
        model_args={"img_size": SIZE, "depth": 1},
        safe_serialization=True,
    )
    hub_cache(TIMM_ID, tmp_path / "push")
    photos = tmp_path / "photos"
    hue_photos(photos / "train", 4, seed=1)
    hue_photos(photos / "val", 3, seed=2)
    run = tmp_path / "tuned"
    argv = ["train", "--init", TIMM_ID, "--recipe", "finetune", "--dataset", "folder", "--data-dir", str(photos)]
    assert main([*argv, "--epochs", "1", "--batch-size", "6", "--device", "cpu", "--out", str(run)]) == 0
    data = load_checkpoint(run).data
    assert (data.crop_mode, data.crop_pct, data.interpolation, data.image_size) == (
        "center",
        0.875,
        "bicubic",
        (64, 64),
    )
    return run, photos


class Inputs:
    """Every tensor a VisionTransformer receives while in a ``with`` block."""

    def __enter__(self) -> list[torch.Tensor]:
        self.seen: list[torch.Tensor] = []

        def hook(module, args):
            if isinstance(module, VisionTransformer):
                self.seen.append(args[0].detach().clone())

        self.handle = torch.nn.modules.module.register_module_forward_pre_hook(hook)
        return self.seen

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def expected_inputs(run, photos) -> list[torch.Tensor]:
    """What the owner feeds for each photo: ``data.eval_transform()(data.load_image(path))``."""
    data = load_checkpoint(run).data
    transform = data.eval_transform()
    return [transform(data.load_image(path)) for path in sorted(photos.glob("*/*/*.jpg"))]


def known(row: torch.Tensor, expected: list[torch.Tensor]) -> bool:
    return any(torch.equal(row, e) for e in expected)


@pytest.mark.slow
def test_predict_feeds_the_eval_transform(finetuned):
    run, photos = finetuned
    image = photos / "val" / "bee" / "001.jpg"
    data = load_checkpoint(run).data
    with Inputs() as seen:
        assert main(["predict", str(run), str(image), "--device", "cpu", "--json"]) == 0
    assert len(seen) == 1 and torch.equal(seen[0], data.eval_transform()(data.load_image(image))[None])


@pytest.mark.slow
def test_evaluate_feeds_the_eval_transform(finetuned, tmp_path):
    run, photos = finetuned
    expected = expected_inputs(run, photos)
    with Inputs() as seen:
        argv = ["evaluate", str(run), "--split", "val", "--device", "cpu", "--out", str(tmp_path / "report")]
        assert main(argv) == 0
    rows = [row for batch in seen for row in batch]
    assert len(rows) == json.loads((tmp_path / "report" / "metrics.json").read_text())["n"] > 0
    assert all(known(row, expected) for row in rows)


@pytest.mark.slow
def test_explain_feeds_the_eval_transform(finetuned, tmp_path):
    run, photos = finetuned
    expected = expected_inputs(run, photos)
    with Inputs() as seen:
        argv = ["explain", str(run), "--split", "val", "--index", "1", "--method", "attention"]
        assert main([*argv, "--device", "cpu", "--out", str(tmp_path / "maps")]) == 0
    assert seen and all(known(row, expected) for row in seen[0])


@pytest.mark.slow
def test_timm_and_onnx_exports_carry_the_eval_transform(finetuned, tmp_path):
    timm = pytest.importorskip("timm")
    run, photos = finetuned
    loaded = load_checkpoint(run)
    data, files = loaded.data, sorted(photos.glob("*/*/*.jpg"))

    assert main(["export", str(run), "--to", "timm", "--out", str(tmp_path / "timm")]) == 0
    theirs = timm.create_model(f"local-dir:{tmp_path / 'timm'}", pretrained=True).eval()
    transform = timm.data.create_transform(**timm.data.resolve_data_config({}, model=theirs))
    for path in files:
        image = Image.open(path).convert("RGB")
        x = transform(image)
        assert torch.equal(x, data.eval_transform()(data.load_image(path))), path
        with torch.no_grad():
            assert (theirs(x[None]) - loaded.model(x[None])).abs().max() <= 1e-5

    if pytest.importorskip("onnx") and pytest.importorskip("onnxscript"):
        import onnx

        assert main(["export", str(run), "--to", "onnx", "--out", str(tmp_path / "model.onnx")]) == 0
        props = {p.key: p.value for p in onnx.load(str(tmp_path / "model.onnx")).metadata_props}
        recorded = timm.data.create_transform(**timm.data.resolve_data_config(json.loads(props["pretrained_cfg"])))
        for path in files:
            assert torch.equal(recorded(Image.open(path).convert("RGB")), data.eval_transform()(data.load_image(path)))


@pytest.mark.slow
def test_an_hf_export_gives_the_runs_probabilities_in_transformers_pipeline(finetuned, tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    run, photos = finetuned
    assert main(["export", str(run), "--to", "hf", "--out", str(tmp_path / "hf")]) == 0
    pipe = transformers.pipeline("image-classification", model=str(tmp_path / "hf"), device="cpu")
    for path in sorted(photos.glob("val/*/*.jpg")):
        capsys.readouterr()
        assert main(["predict", str(run), str(path), "--json", "--top-k", "3", "--device", "cpu"]) == 0
        ours = {t["class"]: t["probability"] for t in json.loads(capsys.readouterr().out)[0]["top"]}
        theirs = {t["label"]: t["score"] for t in pipe(str(path), top_k=3)}
        assert ours.keys() == theirs.keys() and all(abs(ours[k] - theirs[k]) <= 1e-5 for k in ours), (ours, theirs)
