"""`vitlab train --teacher` with a foreign file: refused with the way to describe it, then accepted once converted."""

import pytest
import timm
from safetensors.torch import save_file

from vitlab.cli.main import main
from vitlab.runs import load_checkpoint


@pytest.fixture
def timm_teacher(tmp_path):
    """A digits-sized timm ViT (8x8 gray, 10 classes, 3 heads) saved as a bare state dict."""
    model = timm.create_model(
        "vit_tiny_patch16_224",
        pretrained=False,
        num_classes=10,
        img_size=8,
        patch_size=2,
        in_chans=1,
        depth=1,
        embed_dim=24,
        num_heads=3,
    )
    path = tmp_path / "teacher-timm.safetensors"
    save_file(model.state_dict(), str(path))
    return path


def test_a_teacher_without_its_heads_names_vitlab_convert(timm_teacher, tmp_path, capsys):
    code = main(["train", "--teacher", str(timm_teacher), "--distill", "soft", "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"teacher {timm_teacher}" in err
    assert f"vitlab convert {timm_teacher} teacher.safetensors --num-heads N" in err
    assert not (tmp_path / "run").exists()


def test_the_converted_teacher_distils(timm_teacher, tmp_path):
    converted = tmp_path / "teacher.safetensors"
    assert main(["convert", str(timm_teacher), str(converted), "--num-heads", "3", "--set", "in_chans=1"]) == 0
    assert load_checkpoint(converted).model.config.num_heads == 3
    args = ["--teacher", str(converted), "--distill", "soft", "--rows", "64", "--epochs", "1"]
    run = tmp_path / "run"
    assert main(["train", *args, "--set", "depth=1", "--quiet", "--out", str(run)]) == 0
    assert load_checkpoint(run).kind == "distilled-classifier"
