"""Loading a vitlab-named state dict into a model, with errors that say what went wrong."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import torch
from torch import nn

from ..errors import CheckpointError
from ..models.vit import VisionTransformer
from .keymaps import StateDict, detect_format, hf_key_scheme, infer_config

_ADVICE = {
    "timm": "a timm VisionTransformer state dict: map it with timm_to_vitlab(), or use from_timm() / "
    "`vitlab convert --from timm`",
    "hf": "a Hugging Face ViT state dict ({scheme} names): map it with hf_to_vitlab(), or use from_hf() / "
    "`vitlab convert --from hf`",
    "vitlab": "a vitlab state dict of a differently configured model: build the model from the checkpoint's "
    "config (load_checkpoint() does that for a vitlab safetensors file)",
    None: "no ViT state dict vitlab knows (timm, Hugging Face or vitlab names)",
}


def _some(keys: list[str], n: int = 4) -> str:
    return ", ".join(keys[:n]) + (f", ... ({len(keys)} in all)" if len(keys) > n else "")


def load_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Copy ``state`` into ``model`` strictly (casting to the model's dtype: float16, bfloat16, float64 to float32
    are kept; integer or bool tensors for float weights are refused, the cast would not be exact).

    Raises:
        CheckpointError: naming a tensor of a dtype that is not a float where the model holds floats; or a few
            missing, unexpected or wrongly shaped keys and what the state dict looks like (timm, Hugging Face
            on-disk / in-memory, vitlab) with the way out.
    """
    expected = model.state_dict()
    for key, value in expected.items():
        stored = state.get(key)
        if stored is not None and value.is_floating_point() and not stored.is_floating_point():
            raise CheckpointError(
                f"tensor {key} is stored as {str(stored.dtype).removeprefix('torch.')}, the model holds "
                f"{str(value.dtype).removeprefix('torch.')} weights: vitlab does not cast integer or bool weights "
                f"(a quantised or damaged file?); convert them to a float dtype first"
            )
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    shapes = [
        f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}"
        for k, v in expected.items()
        if k in state and state[k].shape != v.shape
    ]
    if missing or unexpected or shapes:
        problems = [
            f"{len(keys)} {what} ({_some(keys)})"
            for what, keys in (
                ("missing keys", missing),
                ("unexpected keys", unexpected),
                ("shape mismatches, file vs model", shapes),
            )
            if keys
        ]
        kind = detect_format(dict(state))
        looks = _ADVICE[kind].format(scheme=hf_key_scheme(dict(state))) if kind == "hf" else _ADVICE[kind]
        raise CheckpointError(
            f"state dict does not fit this {type(model).__name__}: {'; '.join(problems)}. It looks like {looks}."
        )
    model.load_state_dict(state, strict=True)


def model_from_state(
    state: StateDict, resize_to: int | tuple[int, int] | None = None, **known: Any
) -> tuple[VisionTransformer, dict[str, str]]:
    """Build the :class:`VisionTransformer` a vitlab-named ``state`` fits and load it (eval mode).

    Args:
        state: vitlab names (map timm / Hugging Face dicts with ``timm_to_vitlab`` / ``hf_to_vitlab``).
        resize_to: then run at this image size, resampling learned positions (bicubic, as timm).
        **known: :class:`ViTConfig` fields known from elsewhere; the rest is inferred from shapes.

    Raises:
        ConfigError: a known or inferred field, or ``resize_to``, out of its range (``num_heads=0``, a
            model too large to build), before anything is allocated.

    Returns:
        The model and the config fields that were guessed, ``{field: why}``.
    """
    config, guessed = infer_config(state, **known)  # a ConfigError for a field out of its range
    if resize_to is not None:
        replace(config, img_size=resize_to)  # the same checks at the new size, before building
    model = VisionTransformer(config)
    load_state_dict(model, state)
    if resize_to is not None:
        model.set_image_size(resize_to)
    return model.eval(), guessed
