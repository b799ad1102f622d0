"""Exports: ONNX for every model family, a Hugging Face folder and a timm folder that load back to the same
logits; options a target cannot hold are refused by name."""

import json

import numpy as np
import pytest
import torch

from vitlab.errors import ConfigError, RunFolderError
from vitlab.interop import export_hf, export_onnx, export_timm, to_hf_state_dict
from vitlab.models import build_registered
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig
from vitlab.runs import DataConfig

FAMILIES = ("vit-seed", "vit-tiny-patch16-224", "swin-nano-patch2-window7-28", "cnn-seed")


def small_vit(**options) -> VisionTransformer:
    config = dict(img_size=32, patch_size=8, in_chans=3, embed_dim=64, depth=2, num_heads=4, num_classes=5)
    return VisionTransformer(ViTConfig(**{**config, **options})).eval()


def data_for(model, classes=("a", "b", "c", "d", "e")) -> DataConfig:
    cfg = model.config
    size = tuple(cfg.img_size) if isinstance(cfg.img_size, (tuple, list)) else (cfg.img_size, cfg.img_size)
    return DataConfig(size, cfg.in_chans, (0.4,) * cfg.in_chans, (0.2,) * cfg.in_chans, list(classes))


@pytest.mark.slow
@pytest.mark.parametrize("name", FAMILIES)
def test_onnx_runs_in_onnxruntime_like_torch(name, tmp_path, perturb):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnxscript")
    model = perturb(build_registered(name)).eval()
    cfg = model.config
    path = export_onnx(model, tmp_path / "model.onnx", data_for(model))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (1, 3):  # the batch axis is free
        images = torch.randn(batch, cfg.in_chans, *cfg.img_size)
        with torch.no_grad():
            expected = model(images)
        assert type(expected) is torch.Tensor  # exporting left no traced tensor behind in a cache
        (logits,) = session.run(["logits"], {"images": images.numpy()})
        assert np.abs(logits - expected.numpy()).max() <= 1e-4


@torch.no_grad()
@pytest.mark.parametrize(
    "options",
    [
        {},
        dict(qkv_bias=False, norm_eps=1e-12),
        dict(layer_scale=0.1, fc_norm=True),
        dict(pos_embed="sincos2d"),
        dict(pos_embed="rowcol", img_size=(32, 48)),
    ],
    ids=["default", "no-qkv-bias", "layer-scale", "sincos", "rowcol-oblong"],
)
def test_hf_folder_loads_with_the_same_logits(options, tmp_path, perturb):
    transformers = pytest.importorskip("transformers")
    model = perturb(small_vit(**options))
    folder = export_hf(model, tmp_path / "hf", ["a", "b", "c", "d", "e"], data_for(model))
    hf = transformers.ViTForImageClassification.from_pretrained(folder).eval()
    images = torch.randn(2, 3, *model.config.img_size)
    assert (hf(pixel_values=images).logits - model(images)).abs().max() <= 1e-5
    assert hf.config.id2label[4] == "e" and hf.config.layer_norm_eps == model.config.norm_eps
    assert json.loads((folder / "preprocessor_config.json").read_text())["pretrained_cfg"]["std"] == [0.2] * 3


@torch.no_grad()
def test_hf_folder_reads_back_into_vitlab(tmp_path, perturb):
    from vitlab.runs import load_checkpoint

    model = perturb(small_vit())
    loaded = load_checkpoint(export_hf(model, tmp_path / "hf", list("vwxyz")))
    images = torch.randn(2, 3, 32, 32)
    assert (loaded.model(images) - model(images)).abs().max() <= 1e-5


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(pool="mean"), "pool='mean'"),
        (dict(pool="mean", class_token=False), "class_token=False"),
        (dict(reg_tokens=2), "reg_tokens=2"),
        (dict(qk_norm=True), "qk_norm=True"),
        (dict(pos_embed="rope"), "rope"),
        (dict(block="postnorm"), "block='postnorm'"),
        (dict(attention="lsa"), "attention='lsa'"),
        (dict(final_norm=False), "final_norm=False"),
        (dict(pre_norm=True), "pre_norm=True"),
        (dict(patch_embed="spt"), "spt"),
    ],
)
def test_hf_refuses_what_its_vit_cannot_express(options, named, tmp_path):
    with pytest.raises(ConfigError, match=rf"cannot express .*{named}"):
        export_hf(small_vit(**options), tmp_path / "hf", [])
    assert not (tmp_path / "hf").exists()


def test_hf_refuses_other_families_and_wrong_class_names(tmp_path):
    with pytest.raises(ConfigError, match="SwinTransformer"):
        export_hf(build_registered("swin-nano-patch2-window7-28"), tmp_path / "hf", [])
    with pytest.raises(ConfigError, match="3 class names"):
        export_hf(small_vit(), tmp_path / "hf", ["a", "b", "c"])


def test_hf_state_dict_uses_published_names():
    state = to_hf_state_dict(small_vit())
    assert "vit.encoder.layer.1.attention.attention.query.weight" in state
    assert state["vit.embeddings.position_embeddings"].shape == (1, 17, 64)
    assert not state["vit.embeddings.position_embeddings"][:, 0].any()  # the class token's is folded in


@torch.no_grad()
@pytest.mark.parametrize("name", ["vit-seed", "vit-tiny-patch16-224"])
def test_timm_folder_loads_with_the_same_logits(name, tmp_path, perturb):
    timm = pytest.importorskip("timm")
    model = perturb(build_registered(name, num_classes=5)).eval()
    cfg = model.config
    folder = export_timm(model, tmp_path / "timm", data_for(model))
    config = json.loads((folder / "config.json").read_text())
    images = torch.randn(2, cfg.in_chans, *cfg.img_size)
    by_folder = timm.create_model(f"local-dir:{folder}", pretrained=True).eval()
    by_overlay = timm.create_model(
        config["architecture"],
        pretrained=True,
        **config["model_args"],
        pretrained_cfg_overlay=dict(file=str(folder / "model.safetensors"), **config["pretrained_cfg"]),
    ).eval()
    for timm_model in (by_folder, by_overlay):
        assert (timm_model(images) - model(images)).abs().max() <= 1e-5
        pretrained = timm_model.pretrained_cfg
        assert tuple(pretrained["input_size"]) == (cfg.in_chans, *cfg.img_size)
        assert (pretrained["mean"], pretrained["num_classes"]) == ([0.4] * cfg.in_chans, 5)
    assert config["label_names"] == ["a", "b", "c", "d", "e"]


def test_timm_refuses_what_its_config_cannot_hold(tmp_path):
    model = small_vit(norm_eps=1e-12)
    with pytest.raises(ConfigError, match="norm_eps=1e-12"):
        export_timm(model, tmp_path / "timm", data_for(model))
    with pytest.raises(ConfigError, match="SimpleCNN"):
        export_timm(build_registered("cnn-seed"), tmp_path / "timm", data_for(model))


def test_an_existing_export_is_kept_unless_overwritten(tmp_path):
    model = small_vit()
    export_timm(model, tmp_path / "timm", data_for(model))
    with pytest.raises(RunFolderError, match="model.safetensors exist: choose another path"):
        export_timm(model, tmp_path / "timm", data_for(model))
    export_timm(model, tmp_path / "timm", data_for(model), overwrite=True)
