"""timm ``SwinTransformer`` -> vitlab :class:`~vitlab.models.swin.SwinTransformer`.

:func:`from_timm_swin` reads the module's attributes and ``state_dict``; it never imports timm.
The names differ in three prefixes only:

=================================  ======================================
vitlab                             timm ``SwinTransformer``
=================================  ======================================
``stages.{s}.blocks.{i}. ...``     ``layers.{s}.blocks.{i}. ...``
``stages.{s}.downsample. ...``     ``layers.{s}.downsample. ...``
``patch_norm.``                    ``patch_embed.norm.``
``head.``                          ``head.fc.``
=================================  ======================================

Exact (float tolerance) wherever each stage's grid is a multiple of its window or fits in one
window, as in every published configuration. Elsewhere timm lets tokens attend to its zero
padding while vitlab masks the padding out, so the conversion refuses those sizes.
"""

from __future__ import annotations

import re
from typing import Any

from torch import nn

from ...errors import CheckpointError
from ...models.swin import SwinConfig, SwinTransformer
from ...ops.windows import fit_window
from ..keymaps import StateDict
from ..state import load_state_dict

_TIMM_TO_VITLAB = ((r"^layers\.", "stages."), (r"^patch_embed\.norm\.", "patch_norm."), (r"^head\.fc\.", "head."))


def _unsupported(what: str) -> CheckpointError:
    return CheckpointError(
        f"timm SwinTransformer with {what} has no vitlab equivalent: vitlab converts Swin models "
        f"with LayerNorm, GELU, average pooling and one window size for all stages"
    )


def timm_swin_to_vitlab(state: StateDict) -> StateDict:
    """A timm ``SwinTransformer`` state dict in vitlab's names (unknown keys pass through unchanged)."""
    out = {}
    for key, value in state.items():
        for pattern, repl in _TIMM_TO_VITLAB:
            key = re.sub(pattern, repl, key)
        out[key] = value
    return out


def timm_swin_config(module: nn.Module) -> dict[str, Any]:
    """The :class:`SwinConfig` fields of a timm ``SwinTransformer``, checking vitlab computes the same."""
    if type(module).__name__ != "SwinTransformer":
        raise _unsupported(f"type {type(module).__name__}")
    swin: Any = module  # timm's attributes, which torch's Module stubs do not know
    if swin.global_pool != "avg":
        raise _unsupported(f"global_pool={swin.global_pool!r}")
    embed = swin.patch_embed
    ph, pw = embed.patch_size
    if ph != pw:
        raise _unsupported(f"{ph}x{pw} patches")
    norms = [m for n, m in swin.named_modules() if isinstance(m, nn.LayerNorm)]
    if not isinstance(embed.norm, nn.LayerNorm) or len({m.eps for m in norms}) != 1:
        raise _unsupported("a patch embedding without LayerNorm or LayerNorms of several eps")
    first = swin.layers[0].blocks[0]
    window = first.attn.window_size
    for s, stage in enumerate(swin.layers):
        for i, block in enumerate(stage.blocks):
            attn = block.attn
            if attn.qkv.out_features != 3 * attn.proj.out_features:
                raise _unsupported(f"head_dim other than width / heads in layers.{s}.blocks.{i}")
            act = block.mlp.act
            if not isinstance(act, nn.GELU) or act.approximate != "none":
                raise _unsupported(f"act_layer {act} in layers.{s}.blocks.{i}")
            grid = tuple(block.input_resolution)
            expected = fit_window(grid, window, tuple(m // 2 for m in window) if i % 2 else (0, 0))
            if (tuple(block.window_size), tuple(block.shift_size)) != expected:
                raise _unsupported(
                    f"window {block.window_size} shift {block.shift_size} in layers.{s}.blocks.{i} "
                    f"(vitlab would use {expected[0]}, {expected[1]})"
                )
            if any(g % m for g, m in zip(grid, block.window_size)):
                raise CheckpointError(
                    f"layers.{s} has a {grid[0]}x{grid[1]} grid, not a multiple of its "
                    f"{block.window_size[0]}x{block.window_size[1]} windows: timm attends to the zero "
                    f"padding there and vitlab masks it, so the logits would differ; choose an image "
                    f"size whose stage grids the window divides"
                )
    if window[0] != window[1]:
        raise _unsupported(f"{window[0]}x{window[1]} windows")
    dim = swin.embed_dim
    return dict(
        img_size=tuple(embed.img_size),
        patch_size=ph,
        in_chans=embed.proj.in_channels,
        num_classes=swin.head.fc.out_features if isinstance(swin.head.fc, nn.Linear) else 0,
        embed_dim=dim,
        depths=tuple(len(stage.blocks) for stage in swin.layers),
        num_heads=tuple(stage.blocks[0].attn.num_heads for stage in swin.layers),
        window_size=window[0],
        mlp_ratio=first.mlp.fc1.out_features / dim,
        qkv_bias=first.attn.qkv.bias is not None,
        norm_eps=norms[0].eps,
    )


def from_timm_swin(module: nn.Module) -> SwinTransformer:
    """A vitlab :class:`SwinTransformer` computing what the timm ``SwinTransformer`` computes.

    Args:
        module: a timm ``SwinTransformer`` (e.g. ``timm.create_model("swin_tiny_patch4_window7_224")``).

    Returns:
        A float32 model in the module's train/eval mode; ``model(images (B, C, H, W))`` gives the
        same logits ``(B, num_classes)``. Dropout rates are not carried over.
    """
    model = SwinTransformer(SwinConfig(**timm_swin_config(module)))
    load_state_dict(model, timm_swin_to_vitlab(module.state_dict()))
    return model.float().train(module.training)
