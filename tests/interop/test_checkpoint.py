"""Checkpoint files and state-dict errors."""

import argparse

import pytest
import torch

from vitlab.interop import infer_config, load_state_dict, read_state_dict, to_timm_state_dict
from vitlab.models import build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint

MNIST = DataConfig((28, 28), 1, (0.1307,), (0.3081,), [str(i) for i in range(10)], dataset="mnist")


@torch.no_grad()
@pytest.mark.parametrize("name", ["vit-seed", "vit-seed-sincos"])
def test_vitlab_checkpoint_rebuilds_the_model(name, tmp_path, perturb):
    model = perturb(build_registered(name).eval())
    save_checkpoint(model, tmp_path / "model.safetensors", "classifier", MNIST)
    loaded = load_checkpoint(tmp_path / "model.safetensors")
    assert loaded.model.config == model.config and loaded.data == MNIST and loaded.name == name
    images = torch.randn(2, 1, 28, 28)
    assert torch.equal(loaded.model(images), model(images))


def test_missing_and_unexpected_keys_are_named():
    state = build_registered("vit-seed").state_dict()
    del state["blocks.0.attn.qkv.weight"]
    state["blocks.0.attn.extra"] = torch.zeros(1)
    with pytest.raises(
        ValueError,
        match=r"1 missing keys \(blocks\.0\.attn\.qkv\.weight\); "
        r"1 unexpected keys \(blocks\.0\.attn\.extra\).*vitlab state dict",
    ):
        load_state_dict(build_registered("vit-seed"), state)


def test_shape_mismatch_is_named():
    with pytest.raises(
        ValueError,
        match=r"shape mismatches.*patch_embed\.proj\.weight \(64, 1, 7, 7\) vs "
        r"\(64, 1, 2, 2\).*differently configured",
    ):
        load_state_dict(build_registered("vit-digits"), build_registered("vit-seed").state_dict())


def test_timm_names_are_recognised():
    timm_state = to_timm_state_dict(build_registered("vit-seed"))
    with pytest.raises(ValueError, match=r"unexpected keys \(pos_embed\).*timm VisionTransformer"):
        load_state_dict(build_registered("vit-seed"), timm_state)


def test_torch_files_are_read_with_weights_only(tmp_path):
    state = build_registered("vit-seed").state_dict()
    torch.save({"state_dict": {f"module.{k}": v for k, v in state.items()}, "epoch": 3}, tmp_path / "wrapped.pth")
    read, metadata = read_state_dict(tmp_path / "wrapped.pth")
    assert read.keys() == state.keys() and metadata == {}
    torch.save(argparse.Namespace(weights=state), tmp_path / "pickled.pth")
    with pytest.raises(ValueError, match="weights_only=True"):
        read_state_dict(tmp_path / "pickled.pth")


@pytest.mark.parametrize(
    "width, readings", [(48, "1, 2, 3, 4, 6, 8, 12, 16, 24 or 48 heads"), (64, "1, 2, 4, 8, 16, 32 or 64 heads")]
)
def test_heads_must_be_given(width, readings):
    state = build_registered("vit-seed", embed_dim=width, num_heads=4).state_dict()
    with pytest.raises(ValueError, match=f"{readings}: pass num_heads"):
        infer_config(state)
    config, guessed = infer_config(state, num_heads=4)
    assert config == build_registered("vit-seed", embed_dim=width, num_heads=4).config and guessed == {}
