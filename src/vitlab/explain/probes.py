"""Probes: what a trained model does when its input is moved, and what its attention does by depth.

:func:`run_probes` runs a list of them (:data:`PROBES`) on normalised images ``(N, C, H, W)`` of a
held-out split; each returns a JSON-ready dict:

- ``permute``, ``shift``, ``occlude``, ``resolution`` (:mod:`~vitlab.explain.input_probes`): the model's
  predictions with its patches shuffled (with and without its positions), shifted, occluded, at other
  sides, against those on the images as they are (agreement) and the labels (accuracy).
- ``attention`` (:mod:`~vitlab.explain.attention_depth`): per layer and head, mean attention distance,
  entropy, weight on the prefix tokens, max and max - min, and the rollout's distance by depth; for a
  CNN its receptive field by depth.

:func:`~vitlab.explain.probe_tables.probes_markdown` renders the tables.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import nn

from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from .attention_depth import attention_diagnostics, receptive_fields
from .input_probes import occlusion_probe, permutation_probe, probe_patch, resolution_probe, shift_probe

PROBES = ("permute", "shift", "occlude", "resolution", "attention")
NEEDS_CLASSES = ("permute", "shift", "occlude", "resolution")  # probes that compare predictions


def run_probes(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor | None,
    names: Sequence[str],
    patch_size: int | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Each probe of ``names`` (:data:`PROBES`) on normalised ``images`` (and their ``labels``; ``None`` for an
    encoder, which only the ``attention`` probe can take): ``{"patch", "patch_source", name: result}``."""
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise ConfigError(f"unknown probe(s) {unknown}: choose from {', '.join(PROBES)} or all")
    classes = [n for n in names if n in NEEDS_CLASSES]
    if classes and (labels is None or getattr(getattr(model, "config", None), "num_classes", 1) == 0):
        raise ConfigError(
            f"probe {', '.join(classes)} compares predicted classes, and this model has no classifier head (an "
            f"encoder): fine-tune it (vitlab train --init CKPT) or use --probe attention"
        )
    patch, source = probe_patch(model, images.shape, patch_size)
    model.eval()
    out: dict[str, Any] = {"patch": patch, "patch_source": source, "images": len(images)}
    known = cast(torch.Tensor, labels)
    runners: dict[str, Callable[[], Any]] = {
        "permute": lambda: permutation_probe(model, images, known, patch, seed=seed),
        "shift": lambda: shift_probe(model, images, known, sorted({1, 2, max(1, patch // 2), patch})),
        "occlude": lambda: occlusion_probe(model, images, known, patch),
        "resolution": lambda: resolution_probe(model, images, known, patch),
        "attention": lambda: _attention_or_fields(model, images),
    }
    for name in names:
        out[name] = runners[name]()
    return out


def _attention_or_fields(model: nn.Module, images: torch.Tensor) -> dict[str, Any]:
    """A model with attention: :func:`attention_diagnostics`; a convnet: its :func:`receptive_fields`."""
    has_attention = any(isinstance(m, MultiHeadSelfAttention) for m in model.modules())
    if has_attention:
        return attention_diagnostics(model, images[:256])
    return {"receptive_fields": receptive_fields(model), "image_side": int(images.shape[-1])}
