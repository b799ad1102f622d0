"""Hugging Face ViT -> vitlab: same logits, both key schemes, eps from the config."""

import pytest
import torch

transformers = pytest.importorskip("transformers")

from vitlab.interop import from_hf, hf_key_scheme, hf_to_vitlab, load_state_dict  # noqa: E402
from vitlab.models import build_registered  # noqa: E402

# In-memory names of newer transformers releases -> names in published checkpoints.
ON_DISK = {
    "attention.q_proj": "attention.attention.query",
    "attention.k_proj": "attention.attention.key",
    "attention.v_proj": "attention.attention.value",
    "attention.o_proj": "attention.output.dense",
    "mlp.fc1": "intermediate.dense",
    "mlp.fc2": "output.dense",
}


def on_disk(state: dict) -> dict:
    out = {}
    for key, value in state.items():
        key = key.replace("vit.layers.", "vit.encoder.layer.")
        for new, old in ON_DISK.items():
            key = key.replace(f".{new}.", f".{old}.")
        out[key] = value
    return out


def hf_config(**options) -> "transformers.ViTConfig":
    return transformers.ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=5,
        **options,
    )


@torch.no_grad()
@pytest.mark.parametrize("options", [{}, dict(qkv_bias=False, layer_norm_eps=1e-6)], ids=["default", "no-qkv-bias"])
def test_classifier_matches(options, perturb):
    source = perturb(transformers.ViTForImageClassification(hf_config(**options)).eval())
    model = from_hf(source)
    images = torch.randn(2, 3, 32, 32)
    assert (model(images) - source(pixel_values=images).logits).abs().max() <= 1e-5
    assert model.config.norm_eps == source.config.layer_norm_eps
    assert model.config.qkv_bias == source.config.qkv_bias


@torch.no_grad()
def test_vit_model_features_match(perturb):
    source = perturb(transformers.ViTModel(hf_config()).eval())  # with its (unused) pooler
    model = from_hf(source)
    images = torch.randn(2, 3, 32, 32)
    assert (model.forward_features(images) - source(pixel_values=images).last_hidden_state).abs().max() <= 1e-5


def test_both_key_schemes_map_alike(perturb):
    source = perturb(transformers.ViTForImageClassification(hf_config()))
    in_memory = source.state_dict()
    published = on_disk(in_memory)
    assert "vit.encoder.layer.1.attention.attention.query.weight" in published
    assert (hf_key_scheme(in_memory), hf_key_scheme(published)) == ("in-memory", "on-disk")
    a, b = hf_to_vitlab(in_memory), hf_to_vitlab(published)
    assert a.keys() == b.keys() == from_hf(source).state_dict().keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_unmapped_hf_state_dict_is_named():
    published = on_disk(transformers.ViTForImageClassification(hf_config()).state_dict())
    with pytest.raises(ValueError, match=r"missing keys.*unexpected keys.*Hugging Face ViT state dict \(on-disk"):
        load_state_dict(build_registered("vit-seed"), published)


def test_approximate_gelu_is_refused():
    with pytest.raises(ValueError, match="hidden_act='gelu_new'"):
        from_hf(transformers.ViTForImageClassification(hf_config(hidden_act="gelu_new")))
