"""timm ``VisionTransformer`` <-> vitlab; the encoder's shared reading in :mod:`~vitlab.interop.timm.encoder`,
timm's Swin in :mod:`~vitlab.interop.timm.swin`, timm's ``config.json`` in :mod:`~vitlab.interop.timm.config`.

:func:`from_timm` reads the module's attributes and ``state_dict``; it never imports timm.
Supported: token / avg / max pooling, class and register tokens (``no_embed_class`` either
way), learned or no positions, ``fc_norm``, ``final_norm``, ``pre_norm`` (patch embedding without
bias), ``qk_norm``, layer scale, ``qkv_bias``, ``dynamic_img_size`` / ``dynamic_img_pad``,
LayerNorm of any eps and exact GELU. Hybrids (``HybridEmbed``) whose backbone is timm's ResNetV2
"same" stem (``vit_tiny_r_s16_p8_224``) or a stack of 3x3 stride-2 Conv2d / BatchNorm2d / ReLU
widening to the token width (Xiao et al.'s stem) become ``patch_embed="resnet_stem"`` /
``"conv_stem"``. timm's ``VisionTransformerRelPos``: :func:`from_timm_relpos` (below).
Anything else (attention pooling ``map``/``prr``, ``avgmax``,
other norms or activations, custom blocks) raises a :class:`~vitlab.errors.CheckpointError` naming it. Dropout rates are
not carried over (they do not change the weights; set them on the config to fine-tune).

timm ``VisionTransformerRelPos`` -> vitlab :class:`~vitlab.models.vit.VisionTransformer` with ``rel_pos``:
timm's relative-position ViT is a plain pre-norm ViT without absolute positions whose attention adds a
learned bias indexed by the 2-D offset of query and key (``rel_pos_type="bias"``: timm's ``RelPosBias``),
one table per block or one shared (``shared_rel_pos=True``). vitlab's ``rel_pos="per_block"`` /
``"shared"`` (:mod:`vitlab.layers.relative_position`) hold the same tables under the same names
(``blocks.{i}.attn.rel_pos.relative_position_bias_table``, ``shared_rel_pos.relative_position_bias_table``),
so the state dict maps as a plain ViT's does. The log-coordinate MLP bias (``rel_pos_type="mlp"``, timm's
default) and the res-post-norm blocks have no vitlab equivalent and are refused by name.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from torch import nn

from ...errors import CheckpointError, ConfigError
from ...models.swin import SwinTransformer
from ...models.vit import VisionTransformer
from ...models.vit_config import ViTConfig
from ..keymaps import StateDict, timm_to_vitlab, vitlab_to_timm
from ..state import model_from_state
from .encoder import (
    TIMM_LAYERNORM_EPS,
    check_encoder,
    check_type,
    encoder_fields,
    patch_embed_fields,
    unsupported,
)
from .swin import from_timm_swin

_POOLS = {"token": "token", "avg": "mean", "max": "max"}
_TIMM_KINDS = {
    "pos_embed": ("learned", "none"),
    "block": ("prenorm",),
    "attention": ("full",),
    "patch_embed": ("conv", "linear"),
    "rel_pos": ("none",),
    "block_norm": ("layernorm",),
    "causal": (False,),
    "patch_stride": (None,),
}  # what timm_kwargs can build


def rename_prefixes(state: StateDict, renames: dict[str, str]) -> StateDict:
    """``state`` with each key starting with a ``renames`` prefix given that prefix's replacement."""
    if not renames:
        return state
    pattern = re.compile("^(" + "|".join(map(re.escape, renames)) + ")")
    return {pattern.sub(lambda m: renames[m.group(1)], k): v for k, v in state.items()}


def timm_config(module: nn.Module) -> dict[str, Any]:
    """The :class:`ViTConfig` fields of a timm ``VisionTransformer``, checking it is one vitlab can run."""
    check_type(module, "VisionTransformer", "a model")
    pool = module.global_pool
    if pool not in _POOLS or module.attn_pool is not None:
        raise unsupported(f"global_pool={pool!r}")
    if module.pool_include_prefix:
        raise unsupported("pool_include_prefix=True")
    embed, _ = patch_embed_fields(module.patch_embed, module.embed_dim)
    eps = check_encoder(module, "Block", "Attention")
    use_fc_norm = not isinstance(module.fc_norm, nn.Identity)
    return dict(
        **embed,
        **encoder_fields(module),
        pos_embed="none" if module.pos_embed is None else "learned",
        pool=_POOLS[pool],
        class_token=module.cls_token is not None,
        reg_tokens=module.num_reg_tokens,
        pre_norm=not isinstance(module.norm_pre, nn.Identity),
        final_norm=use_fc_norm or not isinstance(module.norm, nn.Identity),
        fc_norm=use_fc_norm,
        dynamic_img_size=module.dynamic_img_size,
        norm_eps=eps,
    )


def from_timm(module: nn.Module, img_size: int | tuple[int, int] | None = None) -> VisionTransformer | SwinTransformer:
    """A vitlab :class:`VisionTransformer` computing what the timm ``VisionTransformer`` (or
    ``VisionTransformerRelPos``: :func:`from_timm_relpos`) computes, or a
    :class:`~vitlab.models.swin.SwinTransformer` for a timm ``SwinTransformer``
    (:func:`~vitlab.interop.timm.swin.from_timm_swin`).

    Args:
        module: a timm ``VisionTransformer`` (e.g. ``timm.create_model("vit_tiny_patch16_224")``)
            or ``SwinTransformer``.
        img_size: run at this image size instead, resampling the learned positions bicubically
            as timm's ``resample_abs_pos_embed`` does (ViT only).

    Returns:
        A float32 model in the module's train/eval mode; ``model(images (B, C, H, W))`` gives the
        same logits ``(B, num_classes)``.
    """
    if type(module).__name__ == "VisionTransformerRelPos":
        if img_size is not None:
            raise ConfigError(
                "img_size does not apply to relative-position ViTs (their bias table is for one grid): "
                "build the timm model at the size you want and convert that"
            )
        return from_timm_relpos(module)
    if type(module).__name__ == "SwinTransformer":
        if img_size is not None:
            raise ConfigError(
                "img_size applies to ViTs; build the timm Swin at the size you want (img_size=...) and convert that"
            )
        return from_timm_swin(module)
    known = timm_config(module)
    patch_embed: Any = module.patch_embed
    _, renames = patch_embed_fields(patch_embed, known["embed_dim"])
    state = timm_to_vitlab(rename_prefixes(module.state_dict(), renames), num_patches=patch_embed.num_patches)
    model, _ = model_from_state(state, resize_to=img_size, **known)
    return model.train(module.training)


def to_timm_state_dict(model: VisionTransformer, no_embed_class: bool = False) -> StateDict:
    """``model``'s weights in timm's names, for ``timm...VisionTransformer(**timm_kwargs(model.config))``.

    Args:
        no_embed_class: lay ``pos_embed`` out as timm's ``no_embed_class=True`` models do
            (patch rows only); by default it has zero rows for the prefix tokens.
    """
    cfg = model.config
    other = {k: getattr(cfg, k) for k, kinds in _TIMM_KINDS.items() if getattr(cfg, k) not in kinds}
    if other:
        raise ConfigError(
            f"timm's VisionTransformer has no {', '.join(f'{k}={v!r}' for k, v in other.items())}; "
            f"it holds {', '.join(f'{k} in {v}' for k, v in _TIMM_KINDS.items())}"
        )
    state = vitlab_to_timm({k: v.detach() for k, v in model.state_dict().items()}, no_embed_class)
    if cfg.pre_norm:
        bias = state.pop("patch_embed.proj.bias")
        if bias.any():
            raise ConfigError(
                "timm's pre_norm ViT has no patch-embedding bias but this model's is non-zero: "
                "fold it into the patch tokens or build the timm model with pre_norm=False"
            )
    return state


def timm_kwargs(config: ViTConfig, no_embed_class: bool = False) -> dict[str, Any]:
    """Keyword arguments of timm's ``VisionTransformer`` for the model ``config`` describes."""
    kwargs: dict[str, Any] = dict(
        img_size=config.img_size,
        patch_size=config.patch_size,
        in_chans=config.in_chans,
        num_classes=config.num_classes,
        global_pool={v: k for k, v in _POOLS.items()}[config.pool],
        embed_dim=config.embed_dim,
        depth=config.depth,
        num_heads=config.num_heads,
        mlp_ratio=config.mlp_ratio,
        qkv_bias=config.qkv_bias,
        qk_norm=config.qk_norm,
        init_values=config.layer_scale,
        class_token=config.class_token,
        pos_embed="learn" if config.pos_embed == "learned" else "none",
        no_embed_class=no_embed_class,
        reg_tokens=config.reg_tokens,
        pre_norm=config.pre_norm,
        final_norm=config.final_norm,
        fc_norm=config.fc_norm,
        dynamic_img_size=config.dynamic_img_size,
        dynamic_img_pad=config.pad,
    )
    if config.norm_eps != TIMM_LAYERNORM_EPS:
        kwargs["norm_layer"] = partial(nn.LayerNorm, eps=config.norm_eps)
    return kwargs


_RELPOS_POOLS = {"avg": "mean", "token": "token"}


def _relpos_unsupported(what: str) -> CheckpointError:
    return CheckpointError(
        f"timm VisionTransformerRelPos with {what} has no vitlab equivalent: vitlab converts "
        f"rel_pos_type='bias' models with pre-norm blocks and avg or token pooling"
    )


def timm_relpos_config(module: nn.Module) -> dict[str, Any]:
    """The :class:`~vitlab.models.vit_config.ViTConfig` fields of a timm ``VisionTransformerRelPos``, checking vitlab
    computes the same."""
    if type(module).__name__ != "VisionTransformerRelPos":
        raise _relpos_unsupported(f"type {type(module).__name__}")
    vit: Any = module  # timm's attributes, which torch's Module stubs do not know
    if vit.global_pool not in _RELPOS_POOLS:
        raise _relpos_unsupported(f"global_pool={vit.global_pool!r}")
    tables = [vit.shared_rel_pos] if vit.shared_rel_pos is not None else [b.attn.rel_pos for b in vit.blocks]
    kinds = {type(t).__name__ for t in tables}
    if kinds != {"RelPosBias"}:
        raise _relpos_unsupported(f"relative positions {sorted(kinds)} (rel_pos_type='mlp' or none)")
    embed, _ = patch_embed_fields(vit.patch_embed, vit.embed_dim)
    if embed.get("patch_embed"):
        raise _relpos_unsupported("a hybrid patch embedding")
    eps = check_encoder(vit, "RelPosBlock", "RelPosAttention")
    use_fc_norm = not isinstance(vit.fc_norm, nn.Identity)
    return dict(
        **embed,
        **encoder_fields(vit),
        pos_embed="none",
        pool=_RELPOS_POOLS[vit.global_pool],
        class_token=vit.cls_token is not None,
        reg_tokens=0,
        final_norm=True,
        fc_norm=use_fc_norm,
        rel_pos="shared" if vit.shared_rel_pos is not None else "per_block",
        norm_eps=eps,
    )


def from_timm_relpos(module: nn.Module) -> VisionTransformer:
    """A vitlab :class:`VisionTransformer` computing what the timm ``VisionTransformerRelPos`` computes.

    Args:
        module: e.g. ``timm.create_model("vit_relpos_small_patch16_224", rel_pos_type="bias")`` or
            ``VisionTransformerRelPos(..., rel_pos_type="bias", shared_rel_pos=True)``.

    Returns:
        A float32 model in the module's train/eval mode; images ``(B, C, H, W)`` -> the same logits
        ``(B, num_classes)``.
    """
    known = timm_relpos_config(module)
    model, _ = model_from_state(timm_to_vitlab(module.state_dict()), **known)
    return model.train(module.training)
