"""How a trained classifier holds up when part of the image is gone: patch masking and centre crops.

The chapter's exercise (class token against mean pooling under masking and cropping), measured on
every model of a comparison after its training, on the checkpoint chosen by validation:

- **masking** ``f``: a random share ``f`` of the patches is removed from every image -- the same
  patches for every model with that patch grid (one generator, seeded with :data:`MASK_SEED`), in two
  ways. *Dropped*: a ViT's blocks run without their tokens, as MAE's encoder does (the kept tokens keep
  their own positions: ``forward_features(keep=...)``); only a ViT that can run on a subset of its
  patch tokens (not with a relative position bias, window, low-rank or sparse attention, or merging
  tokens). *Zeroed*: the patches' pixels are set to zero in the normalised input (the training mean),
  for every model: what a CNN can be given, and the one masking every model shares.
- **crop** ``c``: the central ``c`` of each side, resized back to the full image (bilinear).

:func:`robustness` returns one entry per patch grid: a CNN is masked on the grid of every ViT it meets.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..data import ImageDataset
from ..data.preprocess import Normalizes
from ..engine.evaluate import predict_logits
from ..errors import ConfigError
from ..models import VisionTransformer

MASK_SEED = 0  # every model loses the same patches
BATCH = 256


@dataclass(frozen=True)
class Probes:
    """The shares of patches to mask and the centre-crop sides to score (each a fraction)."""

    masks: tuple[float, ...] = (0.25, 0.5)
    crops: tuple[float, ...] = (0.75,)


def probe_key(probe: str, fraction: float) -> str:
    """``drop_0.25`` / ``zero_0.25`` / ``crop_0.75``: an entry's key for a probe (``drop``, ``zero``
    or ``crop``) and its fraction."""
    return f"{probe}_{fraction:g}"


def keep_indices(count: int, num_patches: int, fraction: float, seed: int = MASK_SEED) -> torch.Tensor:
    """Raster indices ``(count, K)``, ascending, of the patches each of ``count`` images keeps when a
    share ``fraction`` of its ``num_patches`` is removed: ``K = num_patches - round(fraction *
    num_patches)``, at least 1. Drawn from a generator seeded with ``seed``, so the same for every model."""
    kept = max(1, num_patches - round(fraction * num_patches))
    noise = torch.rand(count, num_patches, generator=torch.Generator().manual_seed(seed))
    return noise.argsort(dim=1)[:, :kept].sort(dim=1).values


def zero_patches(images: torch.Tensor, keep: torch.Tensor, patch: int) -> torch.Tensor:
    """``images (B, C, H, W)`` with every patch of side ``patch`` not listed in ``keep (B, K)`` set to
    zero; the grid is ``ceil(H / patch) x ceil(W / patch)`` (an edge patch past the image is clipped)."""
    b, _, h, w = images.shape
    gh, gw = -(-h // patch), -(-w // patch)
    mask = torch.zeros(b, gh * gw, dtype=images.dtype, device=images.device)
    mask.scatter_(1, keep.to(images.device), 1.0)
    mask = mask.view(b, 1, gh, gw).repeat_interleave(patch, dim=2).repeat_interleave(patch, dim=3)
    return images * mask[..., :h, :w]


def centre_crop(images: torch.Tensor, fraction: float) -> torch.Tensor:
    """The central ``fraction`` of each side of ``images (B, C, H, W)``, resized back to ``(H, W)``
    bilinearly: ``(B, C, H, W)``."""
    h, w = images.shape[-2:]
    ch, cw = max(1, round(fraction * h)), max(1, round(fraction * w))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = images[..., top : top + ch, left : left + cw]
    return F.interpolate(crop, size=(h, w), mode="bilinear", align_corners=False)


def drops_tokens(model: nn.Module) -> bool:
    """Whether ``model`` is a ViT whose blocks can run on a subset of its patch tokens."""
    if not isinstance(model, VisionTransformer):
        return False
    try:
        model.check_keep()
    except ConfigError:
        return False
    return True


def _accuracy(
    forward: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    images: torch.Tensor,
    labels: torch.Tensor,
    keep: torch.Tensor | None = None,
) -> float:
    """Accuracy of ``forward(batch (b, C, H, W), its rows of keep (b, K) or None) -> logits (b, K')``
    over ``images (N, C, H, W)`` against ``labels (N,)``."""
    correct = 0
    for start in range(0, len(images), BATCH):
        rows = slice(start, start + BATCH)
        logits = forward(images[rows], None if keep is None else keep[rows])
        correct += int((logits.argmax(dim=-1) == labels[rows]).sum())
    return correct / max(1, len(images))


def _cropped(model: nn.Module, fraction: float, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    return model(centre_crop(x, fraction))


def _dropped(model: VisionTransformer, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    return cast(torch.Tensor, model.forward_head(model.forward_features(x, keep=keep)))


def _zeroed(model: nn.Module, patch: int, x: torch.Tensor, keep: torch.Tensor | None) -> torch.Tensor:
    return model(zero_patches(x, cast(torch.Tensor, keep), patch))


@torch.no_grad()
def robustness(
    model: nn.Module,
    data: ImageDataset,
    inputs: Normalizes,
    patches: Sequence[int],
    probes: Probes,
) -> list[dict[str, Any]]:
    """Accuracies of ``model`` (eval mode) on ``data`` (images ``(N, C, H, W)`` in [0, 1], normalised
    by ``inputs``, the splits or their statistics): one entry per patch grid of ``patches``, ``{"patch",
    "clean", and per share f of probes.masks "drop_f" (None unless the model drops tokens) and "zero_f", per side c of
    probes.crops "crop_c"}`` (keys by :func:`probe_key`). ``clean`` is scored as the training scores
    its test split."""
    device = next(model.parameters()).device
    raw, labels = data.images.to(device), data.labels.to(device)
    clean = int((predict_logits(model, raw, inputs).argmax(dim=-1) == labels).sum()) / max(1, len(labels))
    images = inputs.normalize(raw)
    model.eval()
    crops = {probe_key("crop", c): _accuracy(partial(_cropped, model, c), images, labels) for c in probes.crops}
    vit = model if isinstance(model, VisionTransformer) and drops_tokens(model) else None
    out = []
    for patch in patches:
        num_patches = math.prod(-(-side // patch) for side in images.shape[-2:])
        entry: dict[str, Any] = {"patch": patch, "clean": clean}
        for fraction in probes.masks:
            keep = keep_indices(len(images), num_patches, fraction).to(device)
            dropped = None if vit is None else _accuracy(partial(_dropped, vit), images, labels, keep)
            entry[probe_key("drop", fraction)] = dropped
            entry[probe_key("zero", fraction)] = _accuracy(partial(_zeroed, model, patch), images, labels, keep)
        out.append({**entry, **crops})
    return out
