"""Foreign model sources through every command: a timm state dict (safetensors, and a torch file
wrapped in ``{"state_dict": ...}``) and a Hugging Face ``save_pretrained`` folder, each of random
weights shaped for ``digits`` (8x8, one channel, ten classes), go through ``vitlab predict``,
``evaluate``, ``explain`` and ``train --init``; the source library's own forward is the oracle."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")
from safetensors.torch import save_file  # noqa: E402
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD  # noqa: E402
from timm.models.vision_transformer import VisionTransformer as TimmViT  # noqa: E402

from vitlab.cli.main import main  # noqa: E402
from vitlab.data import load_dataset, normalize, read_image  # noqa: E402
from vitlab.runs import load_checkpoint  # noqa: E402

DIGITS = dict(img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64, depth=2, num_heads=4, mlp_ratio=2.0)
HF_DIGITS = dict(
    image_size=8,
    patch_size=2,
    num_channels=1,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    num_labels=10,
)
# vit-digits reshaped to the sources' architecture (what `train --init` trains)
AS_SOURCE = ["--set", "depth=2", "--set", "class_token=true", "--set", "pool=token"]
HEADS = ["--set", "num_heads=4"]


def perturbed(module: torch.nn.Module) -> torch.nn.Module:
    """Noise on every parameter, so that no init value (zero bias, unit scale) hides a wrong mapping."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=generator))
    return module.eval()


def save_timm(module: torch.nn.Module, folder) -> dict[str, str]:
    folder.mkdir(exist_ok=True)
    state = {k: v.contiguous() for k, v in module.state_dict().items()}
    save_file(state, str(folder / "timm.safetensors"))
    torch.save({"state_dict": state, "epoch": 3}, folder / "timm.pth")
    return {"safetensors": str(folder / "timm.safetensors"), "pth": str(folder / "timm.pth")}


@pytest.fixture(scope="module")
def timm_source(tmp_path_factory):
    module = perturbed(TimmViT(**DIGITS))
    return module, save_timm(module, tmp_path_factory.mktemp("timm"))


@pytest.fixture(scope="module")
def hf_source(tmp_path_factory):
    module = perturbed(transformers.ViTForImageClassification(transformers.ViTConfig(**HF_DIGITS)))
    folder = tmp_path_factory.mktemp("hf") / "vit"
    module.save_pretrained(folder)
    return module, str(folder)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    path = tmp_path_factory.mktemp("images") / "digit.png"
    pixels = np.random.default_rng(0).integers(0, 256, (8, 8), dtype=np.uint8)
    Image.fromarray(pixels, mode="L").save(path)
    return path


def forward(module: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    """The source library's own logits."""
    with torch.no_grad():
        out = module(pixel_values=images) if isinstance(module, transformers.PreTrainedModel) else module(images)
    return getattr(out, "logits", out)


def one_prediction(capsys, args: list[str]) -> tuple[str, float, str]:
    assert main(["predict", *args, "--json", "--top-k", "1"]) == 0
    captured = capsys.readouterr()
    (entry,) = json.loads(captured.out)
    (top,) = entry["top"]
    return top["class"], top["probability"], captured.err


# -- predict -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["safetensors", "pth"])
def test_timm_file_predicts_as_timm(timm_source, image, kind, capsys):
    module, files = timm_source
    x = read_image(image, channels=1, size=8)[None]
    probs = forward(module, normalize(x, IMAGENET_DEFAULT_MEAN[:1], IMAGENET_DEFAULT_STD[:1])).softmax(-1)[0]
    name, probability, err = one_prediction(capsys, [files[kind], str(image), *HEADS])
    assert name == str(int(probs.argmax())) and abs(probability - float(probs.max())) <= 1e-5
    assert "vitlab predict: guessed mean/std = ImageNet's" in err  # what was inferred is said


def test_timm_file_predicts_with_a_named_architecture(timm_source, image, capsys):
    module, files = timm_source
    by_heads = one_prediction(capsys, [files["safetensors"], str(image), *HEADS])
    by_name = one_prediction(capsys, [files["safetensors"], str(image), "--model", "vit-digits", *AS_SOURCE])
    assert by_name[:2] == by_heads[:2]


def test_hugging_face_folder_predicts_as_transformers(hf_source, image, capsys):
    module, folder = hf_source
    mean, std = transformers.ViTImageProcessor().image_mean[:1], transformers.ViTImageProcessor().image_std[:1]
    x = read_image(image, channels=1, size=8)[None]
    probs = forward(module, normalize(x, mean, std)).softmax(-1)[0]
    name, probability, err = one_prediction(capsys, [folder, str(image)])
    assert name == module.config.id2label[int(probs.argmax())] and abs(probability - float(probs.max())) <= 1e-5
    assert "num_heads" not in err  # config.json records it


# -- the number of heads: refused when two readings fit, unless given -----------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["predict", "{src}", "{image}"],
        ["evaluate", "{src}", "--dataset", "digits"],
        ["explain", "{src}", "--dataset", "digits", "--out", "{out}"],
    ],
)
def test_unrecorded_heads_are_refused_with_the_way_out(timm_source, image, tmp_path, command, capsys):
    _, files = timm_source
    for src in files.values():
        args = [a.format(src=src, image=image, out=tmp_path / "out") for a in command]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and src in err
        assert "1, 2, 4, 8, 16, 32 or 64 heads" in err and "--set num_heads=N" in err and "--model NAME" in err


def test_hints_are_refused_for_a_vitlab_checkpoint(hf_source, image, tmp_path, capsys):
    assert main(["convert", hf_source[1], str(tmp_path / "vitlab.safetensors")]) == 0
    assert main(["predict", str(tmp_path / "vitlab.safetensors"), str(image), "--model", "vit-digits"]) == 2
    assert "records its own config" in capsys.readouterr().err


def test_convert_gives_the_heads_once_for_every_command(timm_source, image, tmp_path, capsys):
    module, files = timm_source
    dst = tmp_path / "timm-with-config.safetensors"
    assert main(["convert", files["pth"], str(dst), "--to", "timm", "--num-heads", "4"]) == 0
    capsys.readouterr()
    assert (
        one_prediction(capsys, [str(dst), str(image)])[:2]
        == one_prediction(capsys, [files["pth"], str(image), *HEADS])[:2]
    )  # the timm file records its config


# -- evaluate and explain ----------------------------------------------------------------------------


def source_accuracy(module: torch.nn.Module) -> tuple[float, float]:
    """Accuracy and NLL of the source library's forward on digits' test split, standardised as evaluate does."""
    splits = load_dataset("digits")
    logits = forward(module, normalize(splits.test.images, splits.mean, splits.std))
    labels = splits.test.labels
    return (logits.argmax(1) == labels).double().mean().item(), torch.nn.functional.cross_entropy(logits, labels).item()


@pytest.mark.parametrize("source", ["timm", "hf"])
def test_evaluate_scores_as_the_source(timm_source, hf_source, source, tmp_path, capsys):
    module, src, hints = (
        (timm_source[0], timm_source[1]["safetensors"], HEADS) if source == "timm" else (hf_source[0], hf_source[1], [])
    )
    assert main(["evaluate", src, "--dataset", "digits", *hints, "--out", str(tmp_path / "eval")]) == 0
    assert "guessed mean/std" in capsys.readouterr().err
    metrics = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    accuracy, nll = source_accuracy(module)
    assert metrics["dataset"] == "digits" and metrics["n"] == len(load_dataset("digits").test)
    assert metrics["accuracy"] == pytest.approx(accuracy, abs=1e-12) and metrics["nll"] == pytest.approx(nll, abs=1e-4)


@pytest.mark.parametrize("source", ["timm", "hf"])
def test_explain_draws_maps_of_a_foreign_source(timm_source, hf_source, source, tmp_path, capsys):
    src, hints = (timm_source[1]["pth"], HEADS) if source == "timm" else (hf_source[1], [])
    out = tmp_path / "explain"
    assert main(["explain", src, "--dataset", "digits", *hints, "--method", "attention", "--out", str(out)]) == 0
    assert "attention" in capsys.readouterr().out
    assert any(p.suffix == ".png" and p.stat().st_size > 0 for p in out.rglob("*"))


# -- train --init -------------------------------------------------------------------------------------


def init_run(src: str, out, *extra: str) -> torch.nn.Module:
    """One epoch of one step at a negligible learning rate from ``src``: the trained model is the initial one."""
    assert (
        main(
            [
                "train",
                "--model",
                "vit-digits",  # the student named: without it --init trains the source's own architecture
                "--init",
                src,
                *AS_SOURCE,
                *extra,
                "--rows",
                "64",
                "--batch-size",
                "64",
                "--epochs",
                "1",
                "--lr",
                "1e-9",
                "--set",
                "warmup_epochs=0",
                "--augment",
                "none",
                "--out",
                str(out),
                "--quiet",
            ]
        )
        == 0
    )
    return load_checkpoint(out).model


@pytest.mark.parametrize("source", ["timm-safetensors", "timm-pth", "hf"])
def test_train_init_starts_from_the_source(timm_source, hf_source, source, tmp_path, capsys):
    if source == "hf":
        module, src, extra = hf_source[0], hf_source[1], ["--set", "norm_eps=1e-12"]
    else:
        module, src, extra = timm_source[0], timm_source[1][source.split("-")[1]], []
    model = init_run(src, tmp_path / "run", *extra)  # the heads are the trained model's
    x = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        assert (model(x) - forward(module, x)).abs().max() <= 1e-5


def test_train_init_resamples_positions_to_the_data(tmp_path, capsys):
    module = perturbed(TimmViT(**{**DIGITS, "img_size": 16}))  # an 8x8 grid of patches
    files = save_timm(module, tmp_path / "src")
    model = init_run(files["safetensors"], tmp_path / "run")  # digits: a 4x4 grid
    assert model.config.img_size == (8, 8)
    module.set_input_size(img_size=8)  # timm's own resampling
    x = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        assert (model(x) - forward(module, x)).abs().max() <= 1e-5
