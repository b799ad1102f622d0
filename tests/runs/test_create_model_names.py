"""``vitlab.create_model`` takes what the command line takes: a registered name, timm's spelling of one, and a
checkpoint itself (a hub id from the local cache, a checkpoint file)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import vitlab
from vitlab.errors import ConfigError
from vitlab.runs import DataConfig, save_checkpoint

TIMM_ID = "timm/vit_tiny_patch16_224.augreg_in21k"


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "vit_tiny_patch16_224.augreg_in21k", "vit-tiny-patch16-224"])
def test_timms_spelling_of_a_registered_name_builds_it(name):
    model: Any = vitlab.create_model(name, depth=1, num_classes=3)
    assert model.registered_name == "vit-tiny-patch16-224" and model.config.depth == 1


def test_an_unknown_name_is_refused_with_the_nearest(capsys):
    with pytest.raises(
        ConfigError, match=r"unknown model 'vit_tiny_patch16_225' \(did you mean 'vit-tiny-patch16-224'\?\)"
    ):
        vitlab.create_model("vit_tiny_patch16_225")


def test_a_checkpoint_file_gives_its_model_and_weights(tmp_path):
    model: Any = vitlab.create_model("vit-digits", num_classes=3)
    path = save_checkpoint(
        model, tmp_path / "m.safetensors", "classifier", DataConfig((8, 8), 1, (0.5,), (0.5,), ["a", "b", "c"])
    )
    again: Any = vitlab.create_model(str(path))
    x = torch.rand(2, 1, 8, 8)
    torch.testing.assert_close(again.eval()(x), model.eval()(x), rtol=0, atol=0)
    assert again.pretrained_cfg["mean"] == (0.5,)
    with pytest.raises(ConfigError, match="is a checkpoint: it brings its own weights and config"):
        vitlab.create_model(str(path), num_classes=5)


@pytest.mark.slow
def test_a_hub_id_gives_timms_model(hub_cache, tmp_path):
    timm = pytest.importorskip("timm")
    from timm.models._hub import save_for_hf

    reference: Any = timm.create_model("vit_tiny_patch16_224", pretrained=False, num_classes=5, depth=2).eval()
    save_for_hf(reference, tmp_path / "push", safe_serialization=True)
    hub_cache(TIMM_ID, tmp_path / "push")
    model: Any = vitlab.create_model(TIMM_ID).eval()
    x = torch.rand(2, 3, 224, 224)
    with torch.no_grad():
        torch.testing.assert_close(model(x), reference(x), rtol=0, atol=1e-4)
    assert model.pretrained_cfg["input_size"] == (3, 224, 224)
