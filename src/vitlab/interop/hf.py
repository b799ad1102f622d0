"""Hugging Face ``ViTForImageClassification`` / ``ViTModel`` <-> vitlab.

:func:`from_hf` reads the module's ``config`` and ``state_dict``; :func:`to_hf_state_dict` and
:func:`hf_config_json` write the other way. Neither imports transformers. Hugging Face ViT is
timm's original ViT with separate q/k/v projections, LayerNorm eps from its config (1e-12 by
default) and the class token pooled after the final norm.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import torch
from torch import nn

from ..errors import CheckpointError, ConfigError
from ..models.vit import VisionTransformer
from ..models.vit_config import ViTConfig
from ..ops.patches import _pair
from .keymaps import StateDict, hf_to_vitlab
from .state import model_from_state

HF_LAYERNORM_EPS = 1e-12


def _single(value: Any, name: str) -> int:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if pair[0] != pair[1]:
        raise CheckpointError(f"{name}={value!r}: vitlab converts square patches only")
    return int(pair[0])


def hf_config_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`ViTConfig` fields from a Hugging Face ``ViTConfig`` (as a dict, e.g. ``config.json``).

    The number of classes is left to the weights (``ViTModel`` has no classifier).
    """
    if config.get("model_type", "vit") != "vit":
        raise CheckpointError(
            f"model_type {config['model_type']!r} is not Hugging Face's plain ViT ('vit'): "
            f"vitlab converts ViTForImageClassification and ViTModel"
        )
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise CheckpointError(f"hidden_act={act!r}: vitlab's MLP uses exact GELU ('gelu'); no equivalent for this one")
    dim, heads = config["hidden_size"], config["num_attention_heads"]
    if (config.get("head_dim") or dim // heads) * heads != dim:
        raise CheckpointError(
            f"head_dim={config['head_dim']} with {heads} heads does not cover hidden_size={dim}: "
            f"vitlab's heads split the width evenly"
        )
    image = config["image_size"]
    return dict(
        img_size=(image, image) if isinstance(image, int) else tuple(image),
        patch_size=_single(config["patch_size"], "patch_size"),
        in_chans=config["num_channels"],
        embed_dim=dim,
        depth=config["num_hidden_layers"],
        num_heads=heads,
        mlp_ratio=config["intermediate_size"] / dim,
        qkv_bias=config.get("qkv_bias", True),
        norm_eps=config.get("layer_norm_eps", HF_LAYERNORM_EPS),
        pos_embed="learned",
        pool="token",
        class_token=True,
        fc_norm=False,
    )


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
        raise CheckpointError(f"{name} is not a Hugging Face ViTForImageClassification or ViTModel")
    hf_config: Any = module.config
    model, _ = model_from_state(hf_to_vitlab(module.state_dict()), **hf_config_fields(hf_config.to_dict()))
    return model.train(module.training)


# What Hugging Face's ViTForImageClassification holds of each ViTConfig field: a required value, or
# "free" for fields it takes as they are or that do not change what it computes at this image size
# (positions of any additive kind become its table; layer scale folds into the projections; a norm
# after pooling the class token equals the final norm; the other attention kinds' options are unread;
# dropout and dynamic sizes act in training or at other sizes only). A field not listed is refused.
_HF_FIELDS: dict[str, Any] = {
    "pool": "token",
    "class_token": True,
    "reg_tokens": 0,
    "distill_token": False,
    "qk_norm": False,
    "pre_norm": False,
    "final_norm": True,
    "block": "prenorm",
    "attention": "full",
    **dict.fromkeys(
        (
            "img_size",
            "patch_size",
            "in_chans",
            "num_classes",
            "embed_dim",
            "depth",
            "num_heads",
            "mlp_ratio",
            "qkv_bias",
            "norm_eps",
            "fc_norm",
            "layer_scale",
            "pos_embed",
            "patch_embed",
            "window_size",
            "lowrank_k",
            "num_latents",
            "pad",
            "dynamic_img_size",
            "drop_rate",
            "pos_drop_rate",
            "attn_drop_rate",
            "drop_path_rate",
        ),
        "free",
    ),
}


def check_hf_exportable(config: ViTConfig) -> None:
    """Raise :class:`ConfigError` naming every option of ``config`` that Hugging Face's
    ``ViTForImageClassification`` cannot compute."""
    wrong = [
        f"{k}={getattr(config, k)!r} (it has {v!r})"
        for k, v in _HF_FIELDS.items()
        if v != "free" and getattr(config, k) != v
    ]
    wrong += [
        f"{f.name}={getattr(config, f.name)!r} (an option this export does not know)"
        for f in fields(config)
        if f.name not in _HF_FIELDS and getattr(config, f.name) != f.default
    ]
    if config.pos_embed == "rope":
        wrong.append("pos_embed='rope' (it adds positions to the tokens)")
    if config.patch_embed == "spt":
        wrong.append("patch_embed='spt' (it projects plain patches)")
    if config.pad and any(side % config.patch_size for side in _pair(config.img_size, "img_size")):
        wrong.append(f"pad=True at img_size {config.img_size} (it crops a partial patch)")
    if config.num_classes < 1:
        wrong.append("num_classes=0 (it classifies)")
    if wrong:
        raise ConfigError(
            f"Hugging Face's ViTForImageClassification cannot express {'; '.join(wrong)}: export "
            f"this model to ONNX or timm instead (timm holds mean pooling, registers, qk_norm)"
        )


@torch.no_grad()
def to_hf_state_dict(model: VisionTransformer) -> StateDict:
    """``model``'s weights as a Hugging Face ``ViTForImageClassification`` state dict, in the names of
    published checkpoints (``vit.encoder.layer.{i}.attention.attention.query.weight``), which every
    transformers release loads. The inverse of :func:`~vitlab.interop.hf_to_vitlab`: the class token keeps
    its folded position (row 0 of ``position_embeddings`` is zero), fixed positions become the table."""
    cfg = model.config
    check_hf_exportable(cfg)
    state, dim = {k: v.detach() for k, v in model.state_dict().items()}, cfg.embed_dim
    grid = cfg.grid
    table = model.pos_embed(state["patch_embed.proj.weight"].new_zeros(1, grid[0] * grid[1], dim), grid)
    out = {
        "vit.embeddings.cls_token": state["class_token"],
        "vit.embeddings.position_embeddings": torch.cat([table.new_zeros(1, 1, dim), table], dim=1),
        "vit.embeddings.patch_embeddings.projection.weight": state["patch_embed.proj.weight"],
        "vit.embeddings.patch_embeddings.projection.bias": state["patch_embed.proj.bias"],
    }
    for i in range(cfg.depth):
        src, dst = f"blocks.{i}.", f"vit.encoder.layer.{i}."
        for j, name in enumerate(("query", "key", "value")):
            out[f"{dst}attention.attention.{name}.weight"] = state[f"{src}attn.qkv.weight"][j * dim : (j + 1) * dim]
            if cfg.qkv_bias:
                out[f"{dst}attention.attention.{name}.bias"] = state[f"{src}attn.qkv.bias"][j * dim : (j + 1) * dim]
        for ours, theirs, scale in (
            ("attn.proj", "attention.output.dense", "ls1"),
            ("mlp.fc1", "intermediate.dense", "none"),
            ("mlp.fc2", "output.dense", "ls2"),
        ):
            gamma = state.get(f"{src}{scale}.gamma", torch.ones(1))  # LayerScale folds in
            out[f"{dst}{theirs}.weight"] = state[f"{src}{ours}.weight"] * gamma[:, None]
            out[f"{dst}{theirs}.bias"] = state[f"{src}{ours}.bias"] * gamma
        for ours, theirs in (("norm1", "layernorm_before"), ("norm2", "layernorm_after")):
            for kind in ("weight", "bias"):
                out[f"{dst}{theirs}.{kind}"] = state[f"{src}{ours}.{kind}"]
    norm = "norm" if "norm.weight" in state else "fc_norm"
    out["vit.layernorm.weight"], out["vit.layernorm.bias"] = state[f"{norm}.weight"], state[f"{norm}.bias"]
    out["classifier.weight"], out["classifier.bias"] = state["head.weight"], state["head.bias"]
    return {k: v.contiguous() for k, v in out.items()}


def hf_config_json(config: ViTConfig, class_names: Sequence[str]) -> dict[str, Any]:
    """The ``config.json`` of the ``ViTForImageClassification`` that :func:`to_hf_state_dict` fills."""
    check_hf_exportable(config)
    names = [str(n) for n in class_names] or [str(i) for i in range(config.num_classes)]
    if len(names) != config.num_classes or len(set(names)) != len(names):
        raise ConfigError(
            f"{len(names)} class names ({', '.join(names[:4])}{', ...' if len(names) > 4 else ''}) for "
            f"{config.num_classes} outputs: give one distinct name per class (or none for 0, 1, ...)"
        )
    height, width = _pair(config.img_size, "img_size")
    return {
        "architectures": ["ViTForImageClassification"],
        "model_type": "vit",
        "dtype": "float32",
        "hidden_size": config.embed_dim,
        "num_hidden_layers": config.depth,
        "num_attention_heads": config.num_heads,
        "intermediate_size": int(config.embed_dim * config.mlp_ratio),
        "hidden_act": "gelu",
        "hidden_dropout_prob": config.drop_rate,
        "attention_probs_dropout_prob": config.attn_drop_rate,
        "initializer_range": 0.02,
        "layer_norm_eps": config.norm_eps,
        "image_size": height if height == width else [height, width],
        "patch_size": config.patch_size,
        "num_channels": config.in_chans,
        "qkv_bias": config.qkv_bias,
        "encoder_stride": config.patch_size,
        "id2label": dict(enumerate(names)),
        "label2id": {n: i for i, n in enumerate(names)},
    }
