"""Probes that move the input: what a trained classifier predicts when its images are shuffled, shifted,
occluded or resized.

Each probe runs a classifier (eval mode) on normalised images ``(N, C, H, W)`` of a held-out split and
compares its predictions with those on the images as they are: **agreement** is the share of images
whose predicted class does not change, **accuracy** is against the labels ``(N,)``.

- :func:`permutation_probe`: the ``P x P`` patches of every image shuffled by one random permutation of
  the patch grid (the same for every image; several permutations, averaged). A ViT whose patch embedding
  reads each patch alone (the patchify stem) sees its patch tokens shuffled: without positions
  self-attention is permutation-equivariant and mean / class-token pooling invariant, so its predictions
  cannot move (agreement 1 to float precision). Measured as trained and, for a ViT with positions, with
  them removed (absolute table, rotary angles and relative bias set to none); a CNN is the control.
- :func:`shift_probe`: each image translated right and down by ``k`` pixels, the uncovered border set to
  0 in the normalised input (the training mean).
- :func:`occlusion_probe`: a share of the patches removed -- tokens dropped (a ViT that can run on a
  subset) and pixels zeroed -- by :func:`~vitlab.explain.robustness.robustness`.
- :func:`resolution_probe`: the images resized (bilinear) to other sides that the patch divides; a ViT's
  learned positions are resampled to the new grid (bicubic), sinusoidal ones recomputed.

:func:`run_probes` runs a list of probes (:data:`PROBES`): these four and ``attention``
(:func:`~vitlab.explain.attention_depth.attention_diagnostics`: per layer and head, mean attention distance,
entropy, weight on the prefix tokens, max and max - min, the rollout's distance by depth; for a CNN its
receptive field by depth), each a JSON-ready dict; :func:`probes_markdown` renders them as Markdown tables.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from ..data.preprocess import resize_images
from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from ..layers.position import NoPosition
from ..models import VisionTransformer
from ..ops.patches import patchify, unpatchify
from .attention_depth import attention_diagnostics, attention_lines, cell, receptive_fields

BATCH = 256


@torch.no_grad()
def predict(model: nn.Module, images: torch.Tensor, batch: int = BATCH) -> torch.Tensor:
    """Class probabilities ``(N, K)`` of ``model`` on normalised ``images`` (in batches, float32)."""
    return torch.cat([model(chunk).float().softmax(-1) for chunk in images.split(batch)])


def _compare(clean: torch.Tensor, moved: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Accuracy of ``moved`` probabilities, agreement of its predicted classes with ``clean``'s, and the
    largest change of any probability."""
    return {
        "accuracy": float((moved.argmax(-1) == labels).float().mean()),
        "agreement": float((moved.argmax(-1) == clean.argmax(-1)).float().mean()),
        "max_probability_change": float((moved - clean).abs().max()),
    }


def probe_patch(model: nn.Module, image_size: Sequence[int], patch_size: int | None = None) -> tuple[int, str]:
    """The patch side a probe cuts images into and where it came from: ``patch_size``, else the model's
    own, else a quarter of the shorter side (a 4 x 4 grid)."""
    if patch_size is not None:
        return patch_size, "given"
    own = getattr(getattr(model, "config", None), "patch_size", None)
    if own:
        return int(own), "the model's own"
    return max(1, min(image_size[-2:]) // 4), "a quarter of the image side (the model has no patch size)"


def permute_patches(images: torch.Tensor, patch: int, order: torch.Tensor) -> torch.Tensor:
    """``images (B, C, H, W)`` with their ``patch x patch`` patches rearranged: patch ``i`` of the result is
    patch ``order[i]`` of the input (raster order). The patch must divide the image."""
    height, width = images.shape[-2:]
    if height % patch or width % patch:
        raise ConfigError(
            f"the permutation probe shuffles whole patches, and patch {patch} does not divide the "
            f"{height}x{width} images: pass --patch-size with a divisor of the image side"
        )
    tokens = patchify(images, patch)
    return unpatchify(tokens[:, order.to(images.device)], patch, (height // patch, width // patch))


def has_positions(model: nn.Module) -> bool:
    """Whether ``model`` is a ViT that adds positions (an absolute table, rotary angles or a relative bias)."""
    if not isinstance(model, VisionTransformer):
        return False
    cfg = model.config
    return cfg.pos_embed != "none" or cfg.rel_pos != "none"


def without_positions(model: VisionTransformer) -> VisionTransformer:
    """A copy of ``model`` with every position removed: no absolute table, no rotary angles, no relative
    position bias; everything else (weights, mode, device) as it is."""
    stripped = copy.deepcopy(model)
    grid = stripped.config.grid
    stripped.pos_embed = NoPosition(grid)
    stripped.rope = None
    stripped.shared_rel_pos = None
    for module in stripped.modules():
        if isinstance(module, MultiHeadSelfAttention):
            module.rel_pos = None
            object.__setattr__(module, "shared_rel_pos", None)
    stripped.config = copy.deepcopy(stripped.config)
    stripped.config.pos_embed, stripped.config.rel_pos = "none", "none"
    return stripped


def permutation_probe(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, patch: int, permutations: int = 3, seed: int = 0
) -> dict[str, Any]:
    """Shuffle the patches of ``images`` by ``permutations`` random orders (seeded from ``seed``) and compare
    the predictions with the unshuffled ones: one row for the model as trained and, for a ViT with
    positions, one with them removed. Each row: ``clean_accuracy``, and over the permutations the mean
    ``accuracy`` and ``agreement`` and the largest ``max_probability_change``."""
    n = (images.shape[-2] // patch) * (images.shape[-1] // patch)
    generator = torch.Generator().manual_seed(seed)
    orders = [torch.randperm(n, generator=generator) for _ in range(permutations)]
    shuffled = [permute_patches(images, patch, order) for order in orders]
    variants: list[tuple[str, nn.Module]] = [("as trained", model)]
    if has_positions(model):
        variants.append(("positions removed", without_positions(cast(VisionTransformer, model))))
    rows = []
    for name, net in variants:
        clean = predict(net, images)
        found = [_compare(clean, predict(net, moved), labels) for moved in shuffled]
        rows.append(
            {
                "model": name,
                "positions": _position_words(net),
                "clean_accuracy": float((clean.argmax(-1) == labels).float().mean()),
                "accuracy": statistics.fmean(f["accuracy"] for f in found),
                "agreement": statistics.fmean(f["agreement"] for f in found),
                "max_probability_change": max(f["max_probability_change"] for f in found),
            }
        )
    return {"patch": patch, "patches": n, "permutations": permutations, "rows": rows}


def _position_words(model: nn.Module) -> str:
    if not isinstance(model, VisionTransformer):
        return "none (a convnet)"
    cfg = model.config
    kinds = [k for k in (cfg.pos_embed, f"relative bias ({cfg.rel_pos})" if cfg.rel_pos != "none" else "") if k]
    kinds = [k for k in kinds if k != "none"]
    return ", ".join(kinds) or "none"


def shift_images(images: torch.Tensor, pixels: int) -> torch.Tensor:
    """``images (B, C, H, W)`` moved ``pixels`` right and down; the uncovered border is 0."""
    if pixels == 0:
        return images
    moved = torch.zeros_like(images)
    moved[..., pixels:, pixels:] = images[..., : -pixels or None, : -pixels or None]
    return moved


def shift_probe(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, shifts: Sequence[int]
) -> list[dict[str, Any]]:
    """Accuracy and agreement with each image shifted by each of ``shifts`` pixels (right and down)."""
    clean = predict(model, images)
    side = min(images.shape[-2:])
    return [
        {"pixels": k, **_compare(clean, predict(model, shift_images(images, k)), labels)} for k in shifts if k < side
    ]


def occlusion_probe(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, patch: int, shares: Sequence[float] = (0.25, 0.5)
) -> dict[str, Any]:
    """Accuracy with a share of the ``patch``-pixel patches removed (:func:`~vitlab.explain.robustness.
    robustness` on normalised images: tokens dropped where the model can, pixels zeroed always)."""
    from ..data import ImageDataset
    from ..data.preprocess import Statistics
    from .robustness import Probes, robustness

    channels = images.shape[1]
    data = ImageDataset(images.cpu(), labels.cpu(), [str(i) for i in range(int(labels.max()) + 1)])
    (entry,) = robustness(model, data, Statistics.unit(channels), [patch], Probes(tuple(shares), ()))
    return entry


def resolution_probe(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, patch: int, scales: Sequence[float] = (0.5, 1.5, 2.0)
) -> list[dict[str, Any]]:
    """Accuracy and agreement at other image sides (each ``round(scale * side / patch) * patch``, at least one
    patch): the images resized bilinearly, a ViT rebuilt for the new grid (``set_image_size``: learned
    positions resampled). A side the model cannot run at is a row with its ``reason``."""
    clean = predict(model, images)
    height, width = images.shape[-2:]
    out: list[dict[str, Any]] = []
    for scale in scales:
        size = (max(patch, round(scale * height / patch) * patch), max(patch, round(scale * width / patch) * patch))
        row: dict[str, Any] = {"scale": scale, "size": list(size)}
        resized = resize_images(images, size, antialias=False)
        net = model
        try:
            if isinstance(model, VisionTransformer):
                net = copy.deepcopy(model)
                net.set_image_size((size[0], size[1]))
            row.update(_compare(clean, predict(net, resized), labels))
        except (ConfigError, ValueError, RuntimeError) as err:
            row["reason"] = " ".join(str(err).split())
        out.append(row)
    return out


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
    runners: dict[str, Any] = {  # name -> a thunk running it
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


def probes_markdown(result: dict[str, Any], title: str) -> str:
    """The probes of :func:`run_probes` (``result``) as Markdown: one table per probe, the attention
    diagnostics by layer (means over heads) and head, and a sentence on the trend with depth."""
    from ..reporting import markdown_table

    lines = [
        f"# {title}",
        "",
        f"{result['images']:,} images; patches of {result['patch']} px ({result['patch_source']}).",
        "",
    ]
    if "permute" in result:
        p = result["permute"]
        lines += [
            f"## Patches shuffled ({p['permutations']} random orders of the {p['patches']} patches)",
            "",
            *markdown_table(
                [
                    "model",
                    "positions",
                    "clean accuracy",
                    "shuffled accuracy",
                    "agreement",
                    "largest probability change",
                ],
                [
                    [
                        r["model"],
                        r["positions"],
                        cell(r["clean_accuracy"]),
                        cell(r["accuracy"]),
                        cell(r["agreement"]),
                        f"{r['max_probability_change']:.2e}",
                    ]
                    for r in p["rows"]
                ],
            ),
            "",
            "Agreement: the share of images whose predicted class does not change when their patches are shuffled.",
            "",
        ]
    if "shift" in result:
        lines += [
            "## Shifted right and down",
            "",
            *markdown_table(
                ["pixels", "accuracy", "agreement"],
                [[str(r["pixels"]), cell(r["accuracy"]), cell(r["agreement"])] for r in result["shift"]],
            ),
            "",
        ]
    if "occlude" in result:
        entry = result["occlude"]
        keys = [k for k in entry if k not in ("patch", "clean")]
        lines += [
            "## Patches removed (tokens dropped where the model can; pixels zeroed)",
            "",
            *markdown_table(["clean", *keys], [[cell(entry["clean"]), *(cell(entry[k]) for k in keys)]]),
            "",
        ]
    if "resolution" in result:
        lines += [
            "## Other image sides (positions resampled)",
            "",
            *markdown_table(
                ["side", "accuracy", "agreement", "note"],
                [
                    [
                        "x".join(map(str, r["size"])),
                        cell(r.get("accuracy")),
                        cell(r.get("agreement")),
                        r.get("reason", ""),
                    ]
                    for r in result["resolution"]
                ],
            ),
            "",
        ]
    if "attention" in result:
        lines += attention_lines(result["attention"])
    return "\n".join(lines)
