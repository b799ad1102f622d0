"""Hugging Face ``ViTForImageClassification`` / ``ViTModel`` -> vitlab.

:func:`from_hf` reads the module's ``config`` and ``state_dict``; it never imports transformers.
Hugging Face ViT is timm's original ViT with separate q/k/v projections, LayerNorm eps from its
config (1e-12 by default) and the class token pooled after the final norm.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import nn

from ..models.vit import VisionTransformer
from .keymaps import hf_to_vitlab
from .state import model_from_state

HF_LAYERNORM_EPS = 1e-12


def _single(value: Any, name: str) -> int:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if pair[0] != pair[1]:
        raise ValueError(f"{name}={value!r}: vitlab converts square patches only")
    return int(pair[0])


def hf_config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`ViTConfig` fields from a Hugging Face ``ViTConfig`` (as a dict, e.g. ``config.json``).

    The number of classes is left to the weights (``ViTModel`` has no classifier).
    """
    if config.get("model_type", "vit") != "vit":
        raise ValueError(f"model_type {config['model_type']!r} is not Hugging Face's plain ViT ('vit'): "
                         f"vitlab converts ViTForImageClassification and ViTModel")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ValueError(f"hidden_act={act!r}: vitlab's MLP uses exact GELU ('gelu'); no equivalent for this one")
    dim, heads = config["hidden_size"], config["num_attention_heads"]
    if (config.get("head_dim") or dim // heads) * heads != dim:
        raise ValueError(f"head_dim={config['head_dim']} with {heads} heads does not cover hidden_size={dim}: "
                         f"vitlab's heads split the width evenly")
    image = config["image_size"]
    return dict(
        img_size=(image, image) if isinstance(image, int) else tuple(image),
        patch_size=_single(config["patch_size"], "patch_size"), in_chans=config["num_channels"],
        embed_dim=dim, depth=config["num_hidden_layers"], num_heads=heads,
        mlp_ratio=config["intermediate_size"] / dim, qkv_bias=config.get("qkv_bias", True),
        norm_eps=config.get("layer_norm_eps", HF_LAYERNORM_EPS), pos_embed="learned", pool="token",
        class_token=True, fc_norm=False)


def from_hf(module: nn.Module) -> VisionTransformer:
    """A vitlab :class:`VisionTransformer` computing what a Hugging Face ViT computes.

    Args:
        module: ``ViTForImageClassification`` (logits ``(B, num_labels)``) or ``ViTModel`` (no
            head: the vitlab model's ``forward_features`` gives ``last_hidden_state (B, 1 + N, D)``).

    Returns:
        A float32 model in the module's train/eval mode.
    """
    name = type(module).__name__
    if name not in ("ViTForImageClassification", "ViTModel"):
        raise ValueError(f"{name} is not a Hugging Face ViTForImageClassification or ViTModel")
    model, _ = model_from_state(hf_to_vitlab(module.state_dict()), **hf_config_fields(module.config.to_dict()))
    return model.train(module.training)
