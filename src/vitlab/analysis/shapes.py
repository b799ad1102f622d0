"""Tensor shapes through a ViT block, read from a real forward pass, and the report ``vitlab shapes`` prints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ..checks import as_pair
from ..errors import ConfigError
from ..layers.block import Block
from ..models.vit import VisionTransformer
from ..models.vit_config import ViTConfig
from ..ops.patches import patchify

# The layout of each shape ``trace_shapes`` reports. N patches, R prefix tokens, T = R + N.
SHAPE_LAYOUT = {
    "images": "(B, C, H, W)",
    "X_patch": "(B, N, P*P*C)",
    "patch tokens": "(B, N, D)",
    "block input": "(B, T, D)",
    "Q": "(B, H, T, d)",
    "K": "(B, H, T, d)",
    "V": "(B, H, T, d)",
    "QK^T": "(B, H, T, T)",
    "attention weights": "(B, H, T, T)",
    "attention output": "(B, T, D)",
    "block output": "(B, T, D)",
}

MAX_ENTRIES = 2**28  # attention scores a trace holds at most (1 GiB at fp32)
MAX_PARAMS = 2**28  # parameters a traced model holds at most


@torch.no_grad()
def trace_shapes(
    image: int | tuple[int, int] = 224,
    patch: int = 16,
    dim: int = 768,
    heads: int = 12,
    class_token: bool = False,
    channels: int = 3,
    depth: int = 1,
) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors inside a ViT with these sizes, read from one forward pass at batch 1.

    Builds a ``depth``-block :class:`VisionTransformer` (no head), runs a random image through
    it with hooks on the patch embedding, the first block's attention and the last block, and
    forms ``Q, K, V``, ``QK^T`` and the attention weights from the attention layer's real input.
    Refuses sizes whose ``H x T x T`` scores exceed :data:`MAX_ENTRIES`, or whose model has more than
    :data:`MAX_PARAMS` parameters (each 1 GiB at fp32), before allocating either.

    Returns:
        ``{name: shape}`` in forward order, with the names and layouts of :data:`SHAPE_LAYOUT`.
    """
    config = ViTConfig(
        img_size=image,
        patch_size=patch,
        in_chans=channels,
        num_classes=0,
        embed_dim=dim,
        depth=depth,
        num_heads=heads,
        class_token=class_token,
        pool="token" if class_token else "mean",
    )
    tokens = config.grid[0] * config.grid[1] + int(class_token)
    if heads * tokens * tokens > MAX_ENTRIES:
        raise ConfigError(
            f"{heads} heads x {tokens}^2 tokens = {heads * tokens * tokens:,} attention scores "
            f"exceed the {MAX_ENTRIES:,} traced at most: use a larger patch or smaller image, or price "
            f"it without running it (vitlab cost)"
        )
    if config.approx_params > MAX_PARAMS:
        raise ConfigError(
            f"a ViT of depth {depth}, width {dim} on {tokens} tokens has about {config.approx_params:,} "
            f"parameters, above the {MAX_PARAMS:,} traced at most: lower the depth (one block shows every shape)"
            f" or the width, or price it without running it (vitlab cost)"
        )
    model = VisionTransformer(config).eval()
    seen: dict[str, torch.Tensor] = {}

    def keep(name: str, pre: bool) -> Callable[..., None]:
        def hook(module: nn.Module, args: tuple, output: Any = None) -> None:
            seen[name] = args[0] if pre else output  # a forward hook (not pre) gets the output tensor

        return hook

    attn = cast(Block, model.blocks[0]).attn  # the model is ours alone, so its hooks can stay
    model.patch_embed.register_forward_pre_hook(keep("images", pre=True))
    model.patch_embed.register_forward_hook(keep("patch tokens", pre=False))
    model.blocks[0].register_forward_pre_hook(keep("block input", pre=True))
    attn.register_forward_pre_hook(keep("attention input", pre=True))
    attn.register_forward_hook(keep("attention output", pre=False))
    model.blocks[-1].register_forward_hook(keep("block output", pre=False))
    model.forward_features(torch.randn(1, channels, *as_pair(config.img_size)))  # every token through every block
    q, k, v = attn.qkv_heads(seen["attention input"])
    _, weights = attn.forward_with_weights(seen["attention input"])
    seen.update(
        {
            "X_patch": patchify(seen["images"], patch),
            "Q": q,
            "K": k,
            "V": v,
            "QK^T": q @ k.transpose(-2, -1),
            "attention weights": weights,
        }
    )
    return {name: tuple(seen[name].shape) for name in SHAPE_LAYOUT}


def shapes_report(
    image: int = 224,
    patch: int = 16,
    dim: int = 768,
    heads: int = 12,
    class_token: bool = False,
    channels: int = 3,
    depth: int = 1,
) -> str:
    """:func:`trace_shapes` for these sizes as text: a line of the sizes, the patch and token counts, then
    each tensor's name, layout (:data:`SHAPE_LAYOUT`) and shape."""
    shapes = trace_shapes(
        image=image, patch=patch, dim=dim, heads=heads, class_token=class_token, channels=channels, depth=depth
    )
    patches, tokens, head_dim = shapes["X_patch"][1], shapes["block input"][1], shapes["Q"][-1]
    width = max(map(len, shapes)) + 2
    return "\n".join(
        [
            f"image {image}x{image}x{channels}, patch P={patch}, D={dim}, "
            f"H={heads} heads of d={head_dim}, depth {depth}, batch B=1",
            f"N={patches} patches, T={tokens} tokens" + (" (N + class token)" if class_token else ""),
            *(f"{name:{width}}{SHAPE_LAYOUT[name]:16}{shape}" for name, shape in shapes.items()),
        ]
    )
