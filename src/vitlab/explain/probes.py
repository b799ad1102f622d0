"""Probes: what a trained model does when its input is moved, and what its attention does by depth.

Each probe runs a classifier (eval mode) on normalised images ``(N, C, H, W)`` of a held-out split and
compares its predictions with those on the images as they are: **agreement** is the share of images
whose predicted class does not change, **accuracy** is against the labels.

- ``permute`` (:func:`permutation_probe`): the ``P x P`` patches of every image shuffled by one random
  permutation of the patch grid (the same for every image; several permutations, averaged). A ViT whose
  patch embedding reads each patch alone (the patchify stem) sees its patch tokens shuffled: without
  positions self-attention is permutation-equivariant and mean / class-token pooling invariant, so its
  predictions cannot move (agreement 1 to float precision). Measured as trained and, for a ViT with
  positions, with them removed (absolute table, rotary angles and relative bias set to none); a CNN is
  the control.
- ``shift`` (:func:`shift_probe`): each image translated right and down by ``k`` pixels, the uncovered
  border set to 0 in the normalised input (the training mean).
- ``occlude`` (:func:`occlusion_probe`): a share of the patches removed -- tokens dropped (a ViT that can
  run on a subset) and pixels zeroed -- by :func:`~vitlab.explain.robustness.robustness`.
- ``resolution`` (:func:`resolution_probe`): the images resized (bilinear) to other sides that the patch
  divides; a ViT's learned positions are resampled to the new grid (bicubic), sinusoidal ones recomputed.
- ``attention`` (:func:`attention_diagnostics`): per layer and head, over the patch queries, the **mean
  attention distance** in pixels (the attention-weighted distance between a query patch's centre and
  the key patches' centres, weights renormalised over the patch keys), the **entropy** ``H`` of each
  query's row in nats and its effective neighbourhood ``exp(H)`` in tokens, the **fraction of weight on
  the prefix tokens** (class, registers), the most-attended key's weight (**max**) and the row's
  **max - min** (the page's "spread"); and the attention rollout's mean distance up to each depth. Set
  against uniform attention's distance and, for a CNN, the receptive field by depth
  (:func:`receptive_fields`). These hold for any ViT with global attention: supervised, MAE or DINO.

All functions return JSON-ready dicts; :func:`run_probes` runs a list of them and :func:`probes_markdown`
renders the tables.
"""

from __future__ import annotations

import copy
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from ..layers.patch_embed import PatchTokenizer
from ..layers.position import NoPosition
from ..models import VisionTransformer
from ..ops.patches import patchify, unpatchify
from .maps import num_prefix_tokens, rollout_matrix
from .record import attention_layers, record_attention

PROBES = ("permute", "shift", "occlude", "resolution", "attention")
NEEDS_CLASSES = ("permute", "shift", "occlude", "resolution")  # probes that compare predictions
BATCH = 256


# -- shared ------------------------------------------------------------------------------------------


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


# -- permutation -------------------------------------------------------------------------------------


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


# -- shift, occlusion, resolution --------------------------------------------------------------------


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
    from .robustness import Probes, robustness

    channels = images.shape[1]
    data = ImageDataset(images.cpu(), labels.cpu(), [str(i) for i in range(int(labels.max()) + 1)])
    (entry,) = robustness(model, data, (0.0,) * channels, (1.0,) * channels, [patch], Probes(tuple(shares), ()))
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
        resized = F.interpolate(images, size=size, mode="bilinear", align_corners=False)
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


# -- attention by depth ------------------------------------------------------------------------------


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


# -- all probes --------------------------------------------------------------------------------------


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


# -- words -------------------------------------------------------------------------------------------


def _f(value: float | None, digits: int = 4) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


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
                        _f(r["clean_accuracy"]),
                        _f(r["accuracy"]),
                        _f(r["agreement"]),
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
                [[str(r["pixels"]), _f(r["accuracy"]), _f(r["agreement"])] for r in result["shift"]],
            ),
            "",
        ]
    if "occlude" in result:
        entry = result["occlude"]
        keys = [k for k in entry if k not in ("patch", "clean")]
        lines += [
            "## Patches removed (tokens dropped where the model can; pixels zeroed)",
            "",
            *markdown_table(["clean", *keys], [[_f(entry["clean"]), *(_f(entry[k]) for k in keys)]]),
            "",
        ]
    if "resolution" in result:
        lines += [
            "## Other image sides (positions resampled)",
            "",
            *markdown_table(
                ["side", "accuracy", "agreement", "note"],
                [
                    ["x".join(map(str, r["size"])), _f(r.get("accuracy")), _f(r.get("agreement")), r.get("reason", "")]
                    for r in result["resolution"]
                ],
            ),
            "",
        ]
    if "attention" in result:
        lines += attention_lines(result["attention"])
    return "\n".join(lines)


def attention_lines(diag: dict[str, Any]) -> list[str]:
    """Markdown lines for :func:`attention_diagnostics` (or a convnet's receptive fields)."""
    from ..reporting import markdown_table

    if "receptive_fields" in diag:
        return [
            "## Receptive field by depth (a convnet)",
            "",
            *markdown_table(
                ["layer", "receptive field (px)", "mean distance within it (px)"],
                [[r["layer"], str(r["rf"]), _f(r["field_distance"], 2)] for r in diag["receptive_fields"]],
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
            _f(mean("mean_distance", layer), 2),
            _f(diag["rollout_distance"][layer], 2),
            _f(mean("entropy", layer), 3),
            _f(mean("neighbourhood", layer), 2),
            _f(mean("prefix_fraction", layer), 3),
            _f(mean("max", layer), 3),
            _f(mean("max_minus_min", layer), 3),
        ]
        for layer in layers
    ]
    heads = [
        [
            f"{layer + 1}.{head}",
            _f(diag["mean_distance"][layer][head], 2),
            _f(diag["entropy"][layer][head], 3),
            _f(diag["neighbourhood"][layer][head], 2),
            _f(None if diag["prefix_fraction"] is None else diag["prefix_fraction"][layer][head], 3),
            _f(diag["max"][layer][head], 3),
            _f(diag["max_minus_min"][layer][head], 3),
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
