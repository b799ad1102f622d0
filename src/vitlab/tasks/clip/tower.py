"""Pretrained image towers: a timm (or open_clip-style timm) ViT's weights into a CLIP model's image side.

The state dict may be a timm ``VisionTransformer``'s (``cls_token``, ``pos_embed``, ``blocks.*``), also
under open_clip's ``visual.trunk.`` prefix, or a file holding one. Its keys are mapped to vitlab's
names (:func:`vitlab.interop.timm_to_vitlab`) and loaded strictly into ``model.visual``, whose
:class:`~vitlab.models.vit_config.ViTConfig` must describe the same ViT (e.g. ``pre_norm=True`` for timm's
CLIP towers). A ``head.weight`` of shape ``(E, D)`` -- timm's CLIP towers keep CLIP's projection
there -- becomes ``visual_projection``; another head (a classifier) is left out.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ...errors import CheckpointError
from ...interop import load_state_dict, read_state_dict, timm_to_vitlab
from ...models.clip import CLIPModel

PREFIXES = ("module.", "visual.trunk.", "visual.")


def _strip(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    for prefix in PREFIXES:
        if any(k.startswith(prefix) for k in state):
            return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix)}
    return state


def load_image_tower(model: CLIPModel, source: dict[str, torch.Tensor] | str | Path) -> list[str]:
    """Copy a timm ViT's weights (``source``: its state dict, or a ``.safetensors`` / ``.pth`` file of one)
    into ``model``'s image tower; returns the names of the image side's parameters left as they were
    (``["visual_projection.weight"]`` unless the source held CLIP's projection). Raises
    :class:`CheckpointError` naming the keys that do not fit."""
    where = str(source) if isinstance(source, (str, Path)) else "the state dict"
    try:
        state = _strip(read_state_dict(source)[0] if isinstance(source, (str, Path)) else dict(source))
        head = {k: state.pop(k) for k in ("head.weight", "head.bias") if k in state}
        grid = model.visual.config.grid
        load_state_dict(model.visual, timm_to_vitlab(state, num_patches=grid[0] * grid[1]))
    except (ValueError, OSError) as err:
        raise CheckpointError(f"{where} does not fit this image tower: {err}") from err
    projection, bias = head.get("head.weight"), head.get("head.bias")
    if (
        projection is None
        or projection.shape != model.visual_projection.weight.shape
        or (bias is not None and bias.any())
    ):
        return ["visual_projection.weight"]
    with torch.no_grad():
        model.visual_projection.weight.copy_(projection)
    return []


__all__ = ["load_image_tower"]
