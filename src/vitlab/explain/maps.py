"""Explanation maps over the patch grid: every map is ``(B, gh, gw)``, one value per patch.

Inputs are what the model consumes: normalised images ``(B, C, H, W)`` (``normalize(images,
mean, std)``), so the value 0 is the dataset mean. That is the baseline for occlusion and
gradient x input: "removing" a patch sets it to the average training image there.

Methods (:data:`METHODS`):

- ``attention``: the last layer's attention from the query (see below), averaged over heads, on
  the patch keys. Per head and layer: :func:`query_attention` ``(B, L, H, gh, gw)``.
- ``rollout`` (Abnar & Zuidema 2020): per layer ``A_hat = (mean_h A + I) / 2`` (rows renormalised),
  multiplied from the first layer to the last, ``R = A_hat_L ... A_hat_1``; the query's row of
  ``R`` on the patch columns, renormalised to sum to 1.
- ``gradient``: ``|d logit_c / d x|`` summed over each patch's pixels and channels.
- ``gradxinput``: ``|x * d logit_c / d x|`` summed the same way (attribution against the mean image).
- ``occlusion``: the drop in the class-``c`` probability when the patch is set to the baseline;
  every patch of every image in batched forwards. Can be negative (hiding a patch may help).

``c`` is the ``target`` class, by default the predicted one.

The query of an attention map: ``"cls"`` (the class token's row; models pooling the class token),
``"mean"`` (the mean of the patch tokens' rows, the natural query of a mean-pooled model, whose
output averages the patch tokens), or an int, a patch index in raster order. :func:`default_query`
picks ``"cls"`` for ``pool="token"`` and ``"mean"`` otherwise. Prefix keys (class, register tokens)
are left out of the grid, so a class-token query's patch weights sum to less than 1.

Gradient and occlusion maps work for any classifier (a convnet too): give ``patch_size`` when the
model has none. All functions run the model in its current mode: call ``model.eval()`` first.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
from torch import nn

from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention
from ..ops.patches import patchify
from .record import attention_weights

METHODS = ("attention", "rollout", "gradient", "gradxinput", "occlusion")
ATTENTION_METHODS = ("attention", "rollout")
Query = str | int


def num_prefix_tokens(model: nn.Module) -> int:
    """Tokens ahead of the patch tokens in the blocks' sequence: class and register tokens, and the
    distillation token of a DeiT-style distilled ViT (0 for models without any)."""
    return int(getattr(model, "num_prefix_tokens", 0))


def default_query(model: nn.Module) -> str:
    """``"cls"`` for a model that classifies its class token, else ``"mean"``."""
    config = getattr(model, "config", None)
    return "cls" if getattr(config, "pool", None) == "token" else "mean"


def patch_layout(
    model: nn.Module, image_size: Sequence[int], patch_size: int | None = None
) -> tuple[int, tuple[int, int]]:
    """``(P, (gh, gw))`` for images ``(H, W)``: ``patch_size`` or the model's own; a partial patch at
    the bottom or right counts as a whole one."""
    size = patch_size or getattr(getattr(model, "config", None), "patch_size", None)
    if not size or size < 1:
        raise ConfigError(
            f"{type(model).__name__} has no patch size: pass patch_size (--patch-size P) to map "
            f"it over a grid of P x P patches"
        )
    h, w = image_size[-2:]
    return int(size), (-(-h // size), -(-w // size))


def patch_sum(pixels: torch.Tensor, patch_size: int) -> torch.Tensor:
    """``(B, C, H, W) -> (B, gh, gw)``: each patch's sum over its pixels and channels."""
    b, _, h, w = pixels.shape
    return patchify(pixels, patch_size, pad=True).sum(-1).reshape(b, -(-h // patch_size), -(-w // patch_size))


def patch_masks(keep: torch.Tensor, patch_size: int, grid: tuple[int, int], image_size: Sequence[int]) -> torch.Tensor:
    """Patch flags ``(M, gh*gw)`` -> pixel masks ``(M, 1, H, W)`` (1 where the patch is kept)."""
    h, w = image_size[-2:]
    masks = keep.float().reshape(-1, 1, *grid)
    return masks.repeat_interleave(patch_size, -2).repeat_interleave(patch_size, -1)[..., :h, :w]


@torch.no_grad()
def masked_probs(
    model: nn.Module,
    inputs: torch.Tensor,
    keep: torch.Tensor,
    target: torch.Tensor,
    patch_size: int,
    baseline: float = 0.0,
    batch_size: int = 512,
) -> torch.Tensor:
    """The class-``target`` probability of every masked copy of every input.

    Args:
        inputs: ``(B, C, H, W)`` normalised images.
        keep: ``(B, M, gh*gw)`` bool, which patches copy ``m`` of image ``b`` keeps; the others
            are set to ``baseline``.
        target: ``(B,)`` classes.

    Returns:
        ``(B, M)`` probabilities, computed ``batch_size`` images at a time.
    """
    b, m, n = keep.shape
    _, grid = patch_layout(model, inputs.shape, patch_size)
    if grid[0] * grid[1] != n:
        raise ValueError(
            f"keep has {n} patches per copy but {tuple(inputs.shape[-2:])} images make a "
            f"{grid[0]}x{grid[1]} grid of {patch_size}-pixel patches"
        )
    flat_keep = keep.reshape(b * m, n)
    image_of = torch.arange(b, device=inputs.device).repeat_interleave(m)
    probs = []
    for rows in torch.arange(b * m, device=inputs.device).split(batch_size):
        images = inputs[image_of[rows]]
        mask = patch_masks(flat_keep[rows], patch_size, grid, inputs.shape).to(inputs.dtype)
        logits = model(images * mask + baseline * (1 - mask))
        probs.append(logits.float().softmax(-1).gather(1, target[image_of[rows], None])[:, 0])
    return torch.cat(probs).reshape(b, m)


# -- attention maps ----------------------------------------------------------------------------------


def query_rows(weights: torch.Tensor, query: Query, num_prefix: int) -> torch.Tensor:
    """The query's attention rows over all keys: ``(..., N, N) -> (..., N)`` (each sums to 1)."""
    n = weights.shape[-1]
    if query == "cls":
        if num_prefix < 1:
            raise ConfigError(
                "query='cls' reads the class token, but this model has none: use query='mean' or a patch index"
            )
        return weights[..., 0, :]
    if query == "mean":
        return weights[..., num_prefix:, :].mean(-2)
    if isinstance(query, int) and not isinstance(query, bool) and 0 <= query < n - num_prefix:
        return weights[..., num_prefix + query, :]
    raise ConfigError(f"query must be 'cls', 'mean' or a patch index in [0, {n - num_prefix}), got {query!r}")


def to_grid(values: torch.Tensor, num_prefix: int, grid: tuple[int, int]) -> torch.Tensor:
    """Values over all tokens ``(..., R + N)`` -> the patch tokens' values ``(..., gh, gw)``."""
    patches = values[..., num_prefix:]
    if patches.shape[-1] != grid[0] * grid[1]:
        raise ConfigError(
            f"{patches.shape[-1]} patch tokens do not fill the {grid[0]}x{grid[1]} patch grid: "
            f"attention over windows or pooled tokens cannot be mapped onto the image this way"
        )
    return patches.reshape(*patches.shape[:-1], *grid)


def query_attention(
    weights: Sequence[torch.Tensor], query: Query, num_prefix: int, grid: tuple[int, int]
) -> torch.Tensor:
    """Every layer's and head's attention from the query to the patches: ``(B, L, H, gh, gw)``."""
    return to_grid(query_rows(torch.stack(list(weights), 1), query, num_prefix), num_prefix, grid)


def rollout_matrix(weights: Sequence[torch.Tensor]) -> torch.Tensor:
    """Attention rollout ``R = A_hat_L ... A_hat_1`` with ``A_hat = rownorm((mean_h A + I) / 2)``:
    ``(B, N, N)``; row ``i`` says how much of token ``i``'s final state flowed from each input token."""
    rollout = None
    for layer in weights:
        mixed = layer.mean(1)
        mixed = (mixed + torch.eye(mixed.shape[-1], dtype=mixed.dtype, device=mixed.device)) / 2
        mixed = mixed / mixed.sum(-1, keepdim=True)
        rollout = mixed if rollout is None else mixed @ rollout
    if rollout is None:
        raise ValueError("rollout needs at least one layer's attention weights")
    return rollout


def rollout_map(weights: Sequence[torch.Tensor], query: Query, num_prefix: int, grid: tuple[int, int]) -> torch.Tensor:
    """The query's rollout row on the patches, renormalised to sum to 1: ``(B, gh, gw)``."""
    row = to_grid(query_rows(rollout_matrix(weights), query, num_prefix), num_prefix, grid)
    return row / row.sum((-2, -1), keepdim=True)


# -- gradient and occlusion maps --------------------------------------------------------------------


def gradient_map(
    model: nn.Module,
    inputs: torch.Tensor,
    target: torch.Tensor | None = None,
    patch_size: int | None = None,
    times_input: bool = False,
) -> torch.Tensor:
    """Input-gradient saliency (or gradient x input) of the class-``target`` logit: ``(B, gh, gw)``."""
    size, _ = patch_layout(model, inputs.shape, patch_size)
    x = inputs.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model(x)
        target = logits.argmax(-1) if target is None else target
        (grad,) = torch.autograd.grad(logits.gather(1, target[:, None]).sum(), x)
    return patch_sum((grad * inputs if times_input else grad).abs(), size)


@torch.no_grad()
def occlusion_map(
    model: nn.Module,
    inputs: torch.Tensor,
    target: torch.Tensor | None = None,
    patch_size: int | None = None,
    baseline: float = 0.0,
    batch_size: int = 512,
) -> torch.Tensor:
    """Drop in the class-``target`` probability when each patch is set to ``baseline``: ``(B, gh, gw)``."""
    size, grid = patch_layout(model, inputs.shape, patch_size)
    probs = model(inputs).float().softmax(-1)
    target = probs.argmax(-1) if target is None else target
    n = grid[0] * grid[1]
    keep = ~torch.eye(n, dtype=torch.bool, device=inputs.device).expand(len(inputs), n, n)
    occluded = masked_probs(model, inputs, keep, target, size, baseline, batch_size)
    return (probs.gather(1, target[:, None]) - occluded).reshape(len(inputs), *grid)


def compute_maps(
    model: nn.Module,
    inputs: torch.Tensor,
    methods: Iterable[str] = METHODS,
    target: torch.Tensor | None = None,
    query: Query | None = None,
    patch_size: int | None = None,
    baseline: float = 0.0,
) -> dict[str, torch.Tensor]:
    """``{method: (B, gh, gw)}`` for normalised ``inputs (B, C, H, W)`` (see the module docstring).

    ``target`` defaults to the predicted classes, ``query`` to :func:`default_query`.
    """
    methods = list(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ConfigError(f"unknown map method(s) {unknown}: choose from {METHODS}")
    size, grid = patch_layout(model, inputs.shape, patch_size)
    with torch.no_grad():
        if any(m in ATTENTION_METHODS for m in methods):
            logits, weights = attention_weights(model, inputs)
        else:
            logits, weights = model(inputs), []
    target = logits.argmax(-1) if target is None else target
    query = default_query(model) if query is None else query
    prefix = num_prefix_tokens(model)
    maps = {}
    for method in methods:
        if method == "attention":
            maps[method] = query_attention(weights[-1:], query, prefix, grid)[:, 0].mean(1)
        elif method == "rollout":
            maps[method] = rollout_map(weights, query, prefix, grid)
        elif method in ("gradient", "gradxinput"):
            maps[method] = gradient_map(model, inputs, target, size, times_input=method == "gradxinput")
        else:
            maps[method] = occlusion_map(model, inputs, target, size, baseline)
    return maps


def applicable_methods(model: nn.Module) -> list[str]:
    """:data:`METHODS` less the attention ones for a model without self-attention layers."""
    has_attention = any(isinstance(m, MultiHeadSelfAttention) for m in model.modules())
    return [m for m in METHODS if has_attention or m not in ATTENTION_METHODS]


# -- per-head statistics ----------------------------------------------------------------------------


def head_statistics(rows: torch.Tensor) -> dict[str, torch.Tensor]:
    """Statistics of attention rows ``(..., N)`` (each summing to 1), each ``(...)``:

    - ``max``, ``min``: the most and least attended key's weight;
    - ``spread``: ``max - min`` (0 for a head that attends uniformly);
    - ``entropy``: in nats, ``log N`` when uniform, 0 when all weight is on one key;
    - ``uniform_distance``: total variation from uniform, ``sum |a - 1/N| / 2``, in ``[0, 1 - 1/N]``.
    """
    n = rows.shape[-1]
    top, bottom = rows.amax(-1), rows.amin(-1)
    return {
        "max": top,
        "min": bottom,
        "spread": top - bottom,
        "entropy": -(rows * rows.clamp_min(1e-30).log()).sum(-1),
        "uniform_distance": (rows - 1.0 / n).abs().sum(-1) / 2,
    }


def head_attention(
    model: nn.Module, inputs: torch.Tensor, query: Query | None = None
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Every layer's per-head attention from the query (default :func:`default_query`) to the patches,
    ``(B, L, H, gh, gw)``, and :func:`head_statistics` of the query's rows over all keys, each
    ``(B, L, H)``."""
    _, grid = patch_layout(model, inputs.shape)
    _, weights = attention_weights(model, inputs)
    query = default_query(model) if query is None else query
    prefix = num_prefix_tokens(model)
    rows = query_rows(torch.stack(weights, 1), query, prefix)
    return to_grid(rows, prefix, grid), head_statistics(rows)


def position_similarity(table: torch.Tensor) -> torch.Tensor:
    """Cosine similarity of every pair of position vectors: ``(N, D) -> (N, N)``."""
    unit = table.detach().float().reshape(-1, table.shape[-1])
    unit = unit / unit.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return unit @ unit.T
