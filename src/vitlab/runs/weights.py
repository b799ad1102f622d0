"""Weights of a checkpoint into a model built here: the matching ones (``--init``), all of them strictly
(:func:`create_model`, as timm's), and a model run at another image size (``--image-size``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data.config import DataConfig
from ..errors import CheckpointError, ConfigError
from ..models.registry import build_registered, list_models
from .hub import is_hub_id
from .load import load_checkpoint


def load_matching_weights(model: nn.Module, source: str | Path, img_size: tuple[int, int] | None = None) -> list[str]:
    """Copy every weight of the checkpoint at ``source`` (any source :func:`load_checkpoint` reads)
    whose name and shape match ``model``'s; learned positions are resampled to ``img_size`` first.

    Returns the names of ``model``'s tensors left as initialised (e.g. a new head). Raises
    :class:`CheckpointError` if fewer than half of them match (a different architecture). A source
    that does not record its number of heads (a timm state dict) is read with ``model``'s: the
    weights are the same for every head count.
    """
    heads = getattr(getattr(model, "config", None), "num_heads", None)
    unrecorded: dict[str, Any] = {"num_heads": heads} if isinstance(heads, int) else {}
    loaded = load_checkpoint(source, img_size=img_size, **unrecorded)
    set_image_size = getattr(loaded.model, "set_image_size", None)
    if img_size is not None and set_image_size is not None:
        if tuple(getattr(loaded.model.config, "img_size", img_size)) != tuple(img_size):
            set_image_size(img_size)
    state: dict[str, torch.Tensor] = loaded.model.state_dict()
    target = model.state_dict()
    matched = {k: v for k, v in state.items() if k in target and target[k].shape == v.shape}
    if 2 * len(matched) < len(target):
        raise CheckpointError(
            f"too few weights of {loaded.path} fit {type(model).__name__} ({len(matched)} of "
            f"{len(target)}): start from a checkpoint of the same architecture (--model)"
        )
    model.load_state_dict(matched, strict=False)
    return sorted(set(target) - set(matched))


def run_at_size(model: nn.Module, size: tuple[int, int]) -> None:
    """Run ``model`` at image ``size`` when it differs from its own (``--image-size``): learned positions
    resampled, as timm's ``set_input_size``; a model that cannot is refused in one line."""
    own = getattr(getattr(model, "config", None), "img_size", size)
    if tuple(own) == tuple(size):
        return
    set_image_size = getattr(model, "set_image_size", None)
    if set_image_size is None:
        raise ConfigError(f"{type(model).__name__} runs at {tuple(own)} only; drop --image-size {size[0]}")
    set_image_size(tuple(size))


def create_model(name: str, checkpoint_path: str | Path | None = None, **overrides: Any) -> nn.Module:
    """:func:`vitlab.models.build_registered` (``name`` with config ``overrides``), then, with
    ``checkpoint_path``, every weight of that checkpoint (any source :func:`load_checkpoint` reads),
    strictly: a checkpoint that does not fit the model exactly is refused. As timm's ``create_model``.
    The model carries ``pretrained_cfg`` from the checkpoint's data config.

    ``name`` may also be timm's spelling of a registered name (``vit_tiny_patch16_224``), or, as the command
    line takes them, a checkpoint itself: a hub id (``timm/vit_tiny_patch16_224.augreg_in21k``, read from the
    local cache) or a checkpoint file or folder, whose model is returned with its weights."""
    if name not in list_models() and (is_hub_id(name) or Path(name).exists()):
        if checkpoint_path is not None or overrides:
            raise ConfigError(
                f"{name} is a checkpoint: it brings its own weights and config; drop checkpoint_path and the "
                f"config fields, or build a registered name (vitlab.list_models())"
            )
        loaded = load_checkpoint(name)
        return _with_pretrained_cfg(loaded.model, loaded.data)
    model = build_registered(name, **overrides)
    if checkpoint_path is not None:
        loaded = load_checkpoint(checkpoint_path)
        source, target = loaded.model.state_dict(), model.state_dict()
        wrong = sorted(
            k
            for k in set(source) | set(target)
            if k not in source or k not in target or source[k].shape != target[k].shape
        )
        if wrong:
            raise CheckpointError(
                f"{loaded.path} does not fit {name} ({len(wrong)} tensors missing, extra or of "
                f"another shape, e.g. {wrong[0]}): name the architecture it was trained as, or "
                f"pass its config fields"
            )
        model.load_state_dict(source)
        _with_pretrained_cfg(model, loaded.data)
    return model


def _with_pretrained_cfg(model: nn.Module, data: DataConfig) -> nn.Module:
    """``model`` carrying timm's ``pretrained_cfg`` from the data config it was read with."""
    model.pretrained_cfg = data.pretrained_cfg(getattr(getattr(model, "config", None), "num_classes", None))  # type: ignore[assignment]
    return model
