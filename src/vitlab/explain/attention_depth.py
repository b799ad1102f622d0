"""Attention by depth: per layer and head of a ViT, how far and how broadly its patch queries look; a CNN's
receptive field by depth as the control.

:func:`attention_diagnostics` measures, per layer and head, over the patch queries, the **mean attention
distance** in pixels (the attention-weighted distance between a query patch's centre and the key
patches' centres, weights renormalised over the patch keys), the **entropy** ``H`` of each query's row in
nats and its effective neighbourhood ``exp(H)`` in tokens, the **fraction of weight on the prefix
tokens** (class, registers), the most-attended key's weight (**max**) and the row's **max - min** (the
page's "spread"); and the attention rollout's mean distance up to each depth. Set against uniform
attention's distance and, for a CNN, the receptive field by depth (:func:`receptive_fields`). These hold
for any ViT with global attention: supervised, MAE or DINO. :func:`attention_lines` says them in Markdown
tables, with a sentence on their trend with depth.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any, cast

import torch
from torch import nn

from ..errors import ConfigError
from ..layers.patch_embed import PatchTokenizer
from .maps import num_prefix_tokens, rollout_matrix
from .record import attention_layers, record_attention


def token_centres(model: nn.Module, image_size: Sequence[int]) -> torch.Tensor:
    """Pixel coordinates ``(N, 2)`` (row, column) of the centre of each patch token's window, raster order."""
    embed = getattr(model, "patch_embed", None)
    if not isinstance(embed, PatchTokenizer):
        raise ConfigError(f"{type(model).__name__} has no patch tokenizer: its tokens have no place on the image")
    gh, gw = embed.grid_size(*image_size[-2:])
    step, half = embed.stride, (embed.patch_size - 1) / 2
    rows = torch.arange(gh, dtype=torch.float64) * step + half
    cols = torch.arange(gw, dtype=torch.float64) * step + half
    return torch.stack(torch.meshgrid(rows, cols, indexing="ij"), -1).reshape(-1, 2)


def mean_attention_distance(weights: torch.Tensor, distance: torch.Tensor, prefix: int) -> torch.Tensor:
    """Mean over patch queries of the attention-weighted key distance (patch keys, renormalised):
    ``(..., N, N) -> (...)``."""
    patches = weights[..., prefix:, prefix:]
    patches = patches / patches.sum(-1, keepdim=True).clamp_min(1e-12)
    return (patches * distance).sum(-1).mean(-1)


@torch.no_grad()
def attention_diagnostics(model: nn.Module, images: torch.Tensor, batch: int = 64) -> dict[str, Any]:
    """Per layer and head (lists ``[layer][head]``, means over the images and their patch queries):
    ``mean_distance`` (px), ``entropy`` (nats), ``neighbourhood`` (``exp(entropy)`` per row, tokens),
    ``prefix_fraction`` (weight on class and register tokens; ``None`` without them), ``max`` and
    ``max_minus_min`` of each row; per depth ``rollout_distance`` (px, the rollout up to that layer); and
    ``uniform_distance`` (px) and ``uniform_entropy``: uniform attention's over the patch keys. Raises
    :class:`ConfigError` for a model whose attention is not global over its patch tokens (windows, merged
    tokens) or without attention."""
    attention_layers(model)  # a clear error for a convnet
    prefix = num_prefix_tokens(model)
    centres = token_centres(model, images.shape)
    distance = torch.cdist(centres, centres).to(images.device)
    patches = len(centres)
    sums: dict[str, torch.Tensor] = {}
    rollout_sum: torch.Tensor | None = None
    per_image: list[torch.Tensor] = []  # (b, L): each image's mean distance per layer (over heads and queries)
    count = 0
    for chunk in images.split(batch):
        with record_attention(model) as recorder:
            model(chunk)
        weights = [w.double() for w in recorder.weights]
        if any(w.shape[-1] != prefix + patches or w.shape[-2] != prefix + patches for w in weights):
            raise ConfigError(
                f"attention diagnostics need every layer to attend globally over the {patches} patch tokens "
                f"(and {prefix} prefix tokens); this model's layers attend over windows or merged tokens "
                f"({sorted({tuple(w.shape[-2:]) for w in weights})}): use a ViT with full attention"
            )
        stacked = torch.stack(weights, 1)  # (b, L, H, N, N)
        rows = stacked[..., prefix:, :]  # patch queries over every key
        entropy = -(rows * rows.clamp_min(1e-30).log()).sum(-1)
        found = {
            "mean_distance": mean_attention_distance(stacked, distance.double(), prefix),
            "entropy": entropy.mean(-1),
            "neighbourhood": entropy.exp().mean(-1),
            "prefix_fraction": rows[..., :prefix].sum(-1).mean(-1),
            "max": rows.amax(-1).mean(-1),
            "max_minus_min": (rows.amax(-1) - rows.amin(-1)).mean(-1),
        }
        per_image.append(found["mean_distance"].mean(-1).cpu())
        for name, value in found.items():
            sums[name] = sums.get(name, 0) + value.sum(0)
        rolled = torch.stack(
            [
                mean_attention_distance(rollout_matrix(weights[: depth + 1]), distance.double(), prefix)
                for depth in range(len(weights))
            ],
            1,
        )
        rollout_sum = rolled.sum(0) if rollout_sum is None else rollout_sum + rolled.sum(0)
        count += len(chunk)
    out: dict[str, Any] = {name: (value / count).tolist() for name, value in sums.items()}
    if not prefix:
        out["prefix_fraction"] = None
    out["rollout_distance"] = (cast(torch.Tensor, rollout_sum) / count).tolist()
    out["uniform_distance"] = float(distance.double().mean())
    out["uniform_entropy"] = math.log(prefix + patches)
    out["images"] = count
    out["tokens"] = {"patches": patches, "prefix": prefix}
    out["trend"] = depth_trend(torch.cat(per_image).T.tolist())
    return out


def depth_trend(per_layer: Sequence[Sequence[float]]) -> str:
    """How a per-image measurement (``per_layer[l][i]``: image ``i`` at layer ``l``) moves with depth, in
    words, each step judged on the per-image differences by two standard errors: ``rises at every layer``,
    ``rises from the first layer to the last, not at every layer``, the same for ``falls``, or ``does not
    change from the first layer to the last beyond two standard errors``."""
    from ..reporting import judge

    if len(per_layer) < 2:
        return "one layer: no trend with depth"

    def direction(before: Sequence[float], after: Sequence[float]) -> int:
        mean, band, _ = judge([b - a for a, b in zip(before, after)], 1)
        return 0 if band is None or abs(mean) <= band else 1 if mean > 0 else -1

    overall = direction(per_layer[0], per_layer[-1])
    steps = {direction(a, b) for a, b in zip(per_layer, per_layer[1:])}
    if overall == 0:
        return "does not change from the first layer to the last beyond two standard errors"
    word = "rises" if overall > 0 else "falls"
    return (
        f"{word} at every layer"
        if steps == {overall}
        else f"{word} from the first layer to the last, not at every layer"
    )


def _side(value: Any) -> int:
    """A square layer's kernel, stride or dilation (the first of a pair; 1 for ``None``)."""
    value = value[0] if isinstance(value, tuple) else value
    return 1 if value is None else int(value)


def receptive_fields(model: nn.Module) -> list[dict[str, Any]]:
    """Along the convolution stack of ``model`` (its convolutions and poolings in the order they are
    defined, which a plain stack runs them in): each one's name, its receptive field side ``rf`` (px),
    ``jump`` (input pixels between neighbouring outputs), and the mean distance from the field's centre to
    the pixels it covers (``field_distance``, px: what uniform weights over the field would give)."""
    rf, jump, out = 1, 1, []
    for name, module in model.named_modules():
        if not isinstance(module, (nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d)):
            continue
        kernel, stride, dilation = (_side(getattr(module, a, 1)) for a in ("kernel_size", "stride", "dilation"))
        rf += (kernel - 1) * dilation * jump
        jump *= stride
        offsets = torch.arange(rf, dtype=torch.float64) - (rf - 1) / 2
        field = torch.stack(torch.meshgrid(offsets, offsets, indexing="ij"), -1).norm(dim=-1)
        out.append({"layer": name, "rf": rf, "jump": jump, "field_distance": float(field.mean())})
    return out


def cell(value: float | None, digits: int = 4) -> str:
    """``value`` in a table cell with ``digits`` decimals; ``–`` for none."""
    return "–" if value is None else f"{value:.{digits}f}"


def attention_lines(diag: dict[str, Any]) -> list[str]:
    """Markdown lines for :func:`attention_diagnostics` (or a convnet's receptive fields)."""
    from ..reporting import markdown_table

    if "receptive_fields" in diag:
        return [
            "## Receptive field by depth (a convnet)",
            "",
            *markdown_table(
                ["layer", "receptive field (px)", "mean distance within it (px)"],
                [[r["layer"], str(r["rf"]), cell(r["field_distance"], 2)] for r in diag["receptive_fields"]],
            ),
            "",
        ]
    layers = range(len(diag["mean_distance"]))

    def mean(name: str, layer: int) -> float | None:
        values = diag[name]
        return None if values is None else statistics.fmean(values[layer])

    body = [
        [
            str(layer + 1),
            cell(mean("mean_distance", layer), 2),
            cell(diag["rollout_distance"][layer], 2),
            cell(mean("entropy", layer), 3),
            cell(mean("neighbourhood", layer), 2),
            cell(mean("prefix_fraction", layer), 3),
            cell(mean("max", layer), 3),
            cell(mean("max_minus_min", layer), 3),
        ]
        for layer in layers
    ]
    heads = [
        [
            f"{layer + 1}.{head}",
            cell(diag["mean_distance"][layer][head], 2),
            cell(diag["entropy"][layer][head], 3),
            cell(diag["neighbourhood"][layer][head], 2),
            cell(None if diag["prefix_fraction"] is None else diag["prefix_fraction"][layer][head], 3),
            cell(diag["max"][layer][head], 3),
            cell(diag["max_minus_min"][layer][head], 3),
        ]
        for layer in layers
        for head in range(len(diag["mean_distance"][layer]))
    ]
    tokens = diag["tokens"]["patches"] + diag["tokens"]["prefix"]
    return [
        f"## Attention by depth ({diag['images']:,} images, means over the heads and the patch queries)",
        "",
        *markdown_table(
            [
                "layer",
                "mean attention distance (px)",
                "rollout distance (px)",
                "entropy (nats)",
                "neighbourhood exp(H) (tokens)",
                "weight on prefix tokens",
                "max weight",
                "max − min weight",
            ],
            body,
        ),
        "",
        f"Uniform attention over the patches would give a mean distance of {diag['uniform_distance']:.2f} px, an "
        f"entropy of {diag['uniform_entropy']:.3f} nats and a neighbourhood of {tokens} tokens, and put 1/{tokens} = "
        f"{1 / tokens:.4f} on every key (max − min 0). The mean attention distance **{diag['trend']}**.",
        "",
        "Per head (layer.head):",
        "",
        *markdown_table(["head", "distance (px)", "entropy", "exp(H)", "prefix", "max", "max − min"], heads),
        "",
    ]
