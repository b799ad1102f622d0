"""Every registered model through ``vitlab compare`` for one epoch: a study writes its report or is refused
in one line before training -- never trained and then lost to a crash in the report."""

import pytest

from vitlab.cli.main import main
from vitlab.models import get_config, list_models
from vitlab.models.cnn import CNNConfig
from vitlab.models.swin import SwinConfig
from vitlab.models.vit_config import ViTConfig

COMMON = ["--dataset", "synthetic", "--rows", "20", "--epochs", "1", "--augment", "none", "--jobs", "1", "--quiet"]


def flags_for(name: str) -> list[str]:
    """How compare takes ``name``: a CNN family meets vit-digits; a ViT or Swin meets the fixed textbook CNN (a
    CNN matched to ViT-B's 86M parameters would spend the test's time) at its own patch, padded to the image."""
    config = get_config(name)
    if isinstance(config, CNNConfig):
        return ["--cnn", name, "--vit", "vit-digits", "--patches", "4"]
    if isinstance(config, (ViTConfig, SwinConfig)):
        return ["--vit", name, "--patches", str(config.patch_size), "--pad", "--cnns", "textbook"]
    return ["--vit", name]


def test_the_walk_knows_every_kind_of_registered_model():
    kinds = {type(get_config(name)).__name__ for name in list_models()}
    assert {"ViTConfig", "SwinConfig", "CNNConfig"} <= kinds


@pytest.mark.slow
@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_through_compare_for_one_epoch(name, tmp_path, capsys):
    out = tmp_path / "study"
    code = main(["compare", *COMMON, "--out", str(out), *flags_for(name)])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    if isinstance(get_config(name), (ViTConfig, SwinConfig, CNNConfig)):
        assert code == 0, captured.err
        report = (out / "report.md").read_text()
        assert "## Results" in report and (out / "results.json").is_file()
    else:  # not a classifier compare can train: one line, nothing trained, nothing written
        assert code == 2 and len(captured.err.strip().splitlines()) == 1 and captured.out == ""
        assert not (out / "report.md").exists()
