"""``vitlab convert --to timm`` and back keeps a model's own mean/std (a 1-channel model's included), its image
size and class names: the timm file's ``pretrained_cfg`` carries them, and reading it back never substitutes
ImageNet's statistics."""

import pytest
import torch

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint


@pytest.mark.parametrize(
    "chans, mean, std",
    [(1, (0.301,), (0.3757,)), (3, (0.1, 0.2, 0.3), (0.5, 0.6, 0.7))],
    ids=["grey", "rgb"],
)
def test_convert_to_timm_and_back_keeps_the_models_own_statistics(chans, mean, std, tmp_path, capsys):
    torch.manual_seed(0)
    model = build_registered("vit-digits", in_chans=chans, depth=1, embed_dim=16, num_heads=2, num_classes=3)
    data = DataConfig((8, 8), chans, mean, std, ["ant", "bee", "cat"], dataset="digits")
    source = save_checkpoint(model, tmp_path / "model.safetensors", "classifier", data, name="vit-digits")
    timm_file, back = tmp_path / "timm.safetensors", tmp_path / "back.safetensors"
    assert main(["convert", str(source), str(timm_file), "--to", "timm"]) == 0
    assert main(["convert", str(timm_file), str(back)]) == 0
    capsys.readouterr()
    for path in (timm_file, back):
        read = load_checkpoint(path).data
        assert read.in_chans == chans and tuple(read.image_size) == (8, 8)
        assert read.mean == pytest.approx(mean) and read.std == pytest.approx(std), (path.name, read.mean, read.std)
        assert read.classes == ["ant", "bee", "cat"]
    x = torch.rand(2, chans, 8, 8)
    torch.testing.assert_close(load_checkpoint(back).model(x), load_checkpoint(source).model(x))
