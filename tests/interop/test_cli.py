"""``vitlab convert`` on files written from random-init timm and Hugging Face models."""

import shutil

import pytest
import torch

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")
from safetensors.torch import load_file  # noqa: E402
from timm.models.vision_transformer import VisionTransformer as TimmViT  # noqa: E402

from vitlab.cli.main import main  # noqa: E402
from vitlab.interop import timm_kwargs  # noqa: E402
from vitlab.runs import load_checkpoint  # noqa: E402

SMALL = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=5)


@torch.no_grad()
def test_timm_file_to_vitlab_and_back(tmp_path, perturb, capsys):
    source = perturb(TimmViT(**SMALL, reg_tokens=1).eval())
    torch.save(source.state_dict(), tmp_path / "timm.pth")
    assert main(["convert", str(tmp_path / "timm.pth"), str(tmp_path / "vitlab.safetensors"), "--num-heads", "4"]) == 0
    out = capsys.readouterr().out
    assert "timm weights" in out and "num_heads 4" in out and "reg_tokens 1" in out
    assert "guessed num_heads" not in out and "guessed mean/std = ImageNet's" in out  # timm files hold no data
    images = torch.randn(2, 3, 32, 32)
    expected = source(images)
    loaded = load_checkpoint(tmp_path / "vitlab.safetensors")
    assert (loaded.model(images) - expected).abs().max() <= 1e-5
    assert loaded.metadata["provenance"]["source_format"] == "timm"

    assert (
        main(["convert", str(tmp_path / "vitlab.safetensors"), str(tmp_path / "back.safetensors"), "--to", "timm"]) == 0
    )
    assert "vitlab weights" in capsys.readouterr().out
    back = TimmViT(**timm_kwargs(loaded.model.config)).eval()
    back.load_state_dict(load_file(tmp_path / "back.safetensors"), strict=True)
    assert (back(images) - expected).abs().max() <= 1e-5


def test_unrecorded_heads_are_refused_unless_given(tmp_path, capsys):
    torch.save(TimmViT(**SMALL).state_dict(), tmp_path / "timm.pth")
    assert main(["convert", str(tmp_path / "timm.pth"), str(tmp_path / "vitlab.safetensors")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "--set num_heads=N" in err and not (tmp_path / "vitlab.safetensors").exists()
    assert (
        main(["convert", str(tmp_path / "timm.pth"), str(tmp_path / "vitlab.safetensors"), "--set", "num_heads=4"]) == 0
    )
    assert "guessed num_heads" not in capsys.readouterr().out


@torch.no_grad()
def test_hugging_face_directory(tmp_path, perturb, capsys):
    config = transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=5,
    )
    source = perturb(transformers.ViTForImageClassification(config).eval())
    source.save_pretrained(tmp_path / "hf")  # model.safetensors + config.json
    images = torch.randn(2, 3, 32, 32)
    expected = source(pixel_values=images).logits

    assert main(["convert", str(tmp_path / "hf" / "model.safetensors"), str(tmp_path / "a.safetensors")]) == 0
    assert "hf weights" in capsys.readouterr().out
    model = load_checkpoint(tmp_path / "a.safetensors").model
    assert model.config.norm_eps == 1e-12 and model.config.num_heads == 4
    assert (model(images) - expected).abs().max() <= 1e-5

    (tmp_path / "bare").mkdir()  # the weights without config.json
    shutil.copy(tmp_path / "hf" / "model.safetensors", tmp_path / "bare" / "model.safetensors")
    assert (
        main(
            [
                "convert",
                str(tmp_path / "bare" / "model.safetensors"),
                str(tmp_path / "b.safetensors"),
                "--set",
                "num_heads=4",
            ]
        )
        == 0
    )
    assert "guessed norm_eps = 1e-12" in capsys.readouterr().out
    converted = load_checkpoint(tmp_path / "b.safetensors")
    assert (converted.model(images) - expected).abs().max() <= 1e-5
    assert "norm_eps" in converted.metadata["provenance"]["guessed"]  # recorded for the next reader


def test_bad_input_exits_with_a_message(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "absent.pth"), str(tmp_path / "out.safetensors")]) == 2
    err = capsys.readouterr().err
    assert "no checkpoint at" in err and "absent.pth" in err and len(err.splitlines()) == 1
    torch.save(TimmViT(**SMALL).state_dict(), tmp_path / "timm.pth")
    assert main(["convert", str(tmp_path / "timm.pth"), str(tmp_path / "out.pth"), "--num-heads", "4"]) == 2
    err = capsys.readouterr().err
    assert "ending in .safetensors" in err and "out.pth" in err and len(err.splitlines()) == 1
