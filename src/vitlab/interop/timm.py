"""timm ``VisionTransformer`` <-> vitlab.

:func:`from_timm` reads the module's attributes and ``state_dict``; it never imports timm.
Supported: token / avg / max pooling, class and register tokens (``no_embed_class`` either
way), learned or no positions, ``fc_norm``, ``final_norm``, ``pre_norm`` (patch embedding without
bias), ``qk_norm``, layer scale, ``qkv_bias``, ``dynamic_img_size`` / ``dynamic_img_pad``,
LayerNorm of any eps and exact GELU. Hybrids (``HybridEmbed``) whose backbone is timm's ResNetV2
"same" stem (``vit_tiny_r_s16_p8_224``) or a stack of 3x3 stride-2 Conv2d / BatchNorm2d / ReLU
widening to the token width (Xiao et al.'s stem) become ``patch_embed="resnet_stem"`` /
``"conv_stem"``. timm's ``VisionTransformerRelPos``: :func:`~vitlab.interop.timm_relpos.from_timm_relpos`.
Anything else (attention pooling ``map``/``prr``, ``avgmax``,
other norms or activations, custom blocks) raises a ``ValueError`` naming it. Dropout rates are
not carried over (they do not change the weights; set them on the config to fine-tune).
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from torch import nn

from ..layers.conv_stem import conv_stem_widths
from ..layers.hybrid_embed import conv_stem_convs
from ..models.swin import SwinTransformer
from ..models.vit import VisionTransformer, ViTConfig
from .keymaps import StateDict, timm_to_vitlab, vitlab_to_timm
from .state import model_from_state
from .timm_swin import from_timm_swin

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
TIMM_LAYERNORM_EPS = 1e-6


def _unsupported(what: str) -> ValueError:
    return ValueError(
        f"timm VisionTransformer with {what} has no vitlab equivalent: vitlab converts pre-norm "
        f"LayerNorm/GELU ViTs with token, avg or max pooling"
    )


def _check_type(module: nn.Module, name: str, where: str) -> None:
    if type(module).__name__ != name:
        raise _unsupported(f"{where} of type {type(module).__name__} (expected timm's {name})")


def _norm_eps(module: nn.Module, where: str) -> float | None:
    """The eps of a LayerNorm with weight and bias, ``None`` for ``nn.Identity``."""
    if isinstance(module, nn.Identity):
        return None
    if not isinstance(module, nn.LayerNorm) or module.weight is None or module.bias is None:
        raise _unsupported(f"{where} = {type(module).__name__} (vitlab uses LayerNorm with weight and bias)")
    return module.eps


def check_encoder(module: Any, block_type: str, attn_type: str) -> float:
    """Check the blocks of a timm ViT (``block_type`` / ``attn_type`` modules, LayerNorm, exact GELU, biased
    projections) are ones vitlab runs; return the LayerNorms' one eps."""
    names = ("norm1", "norm2", "q_norm", "k_norm", "norm", "norm_pre", "fc_norm")
    eps = {
        e
        for n, m in module.named_modules()
        if not n.startswith("patch_embed.") and n.rsplit(".", 1)[-1] in names
        if (e := _norm_eps(m, n)) is not None
    }
    if len(eps) > 1:
        raise _unsupported(f"LayerNorms of several eps {sorted(eps)}")
    for i, block in enumerate(module.blocks):
        _check_type(block, block_type, f"blocks.{i}")
        _check_type(block.attn, attn_type, f"blocks.{i}.attn")
        _check_type(block.mlp, "Mlp", f"blocks.{i}.mlp")
        if not isinstance(getattr(block.attn, "norm", nn.Identity()), nn.Identity) or not isinstance(
            block.mlp.norm, nn.Identity
        ):
            raise _unsupported(f"scale_attn_norm / scale_mlp_norm in blocks.{i}")
        if getattr(block.attn, "gate", None) is not None:
            raise _unsupported(f"a gated attention in blocks.{i}")
        if any(layer.bias is None for layer in (block.attn.proj, block.mlp.fc1, block.mlp.fc2)):
            raise _unsupported(f"proj_bias=False in blocks.{i}")
        act = block.mlp.act
        if not isinstance(act, nn.GELU) or act.approximate != "none":
            raise _unsupported(f"act_layer {act} in blocks.{i} (vitlab's MLP uses exact GELU)")
    return eps.pop() if eps else TIMM_LAYERNORM_EPS


def encoder_fields(module: Any) -> dict[str, Any]:
    """The :class:`ViTConfig` fields every timm ViT records the same way: sizes, heads, biases, layer scale."""
    first = module.blocks[0]
    return dict(
        num_classes=module.head.out_features if isinstance(module.head, nn.Linear) else 0,
        embed_dim=module.embed_dim,
        depth=len(module.blocks),
        num_heads=first.attn.num_heads,
        mlp_ratio=first.mlp.fc1.out_features / module.embed_dim,
        qkv_bias=first.attn.qkv.bias is not None,
        qk_norm=not isinstance(first.attn.q_norm, nn.Identity),
        layer_scale=getattr(first.ls1, "init_values", 1e-5) if hasattr(first.ls1, "gamma") else None,
    )


def _is_conv_stem(backbone: Any, embed_dim: int) -> bool:
    """Whether ``backbone`` is Xiao et al.'s stem as a plain ``nn.Sequential``: (3x3 stride-2 Conv2d without bias,
    BatchNorm2d, ReLU) repeated, widths :func:`~vitlab.layers.conv_stem.conv_stem_widths`."""
    layers = list(backbone.children()) if type(backbone) is nn.Sequential else []
    convs = layers[0::3]
    if not layers or len(layers) % 3 or len(convs) > 4:
        return False
    widths = conv_stem_widths(embed_dim, len(convs))
    return all(
        type(conv) is nn.Conv2d
        and conv.kernel_size == (3, 3)
        and conv.stride == (2, 2)
        and conv.padding == (1, 1)
        and conv.bias is None
        and conv.out_channels == width
        and type(norm) is nn.BatchNorm2d
        and type(act) is nn.ReLU
        for conv, norm, act, width in zip(convs, layers[1::3], layers[2::3], widths)
    )


def _is_resnet_stem(backbone: Any) -> bool:
    """Whether ``backbone`` is timm's ResNetV2 "same" stem as vitlab's :class:`~vitlab.layers.ResNetStem`."""
    conv, norm, pool = (getattr(backbone, name, None) for name in ("conv", "norm", "pool"))
    if conv is None or norm is None or pool is None:
        return False
    return (
        type(backbone) is nn.Sequential
        and len(backbone) == 3
        and type(conv).__name__ == "StdConv2dSame"
        and conv.kernel_size == (7, 7)
        and conv.stride == (2, 2)
        and conv.eps == 1e-8
        and conv.out_channels == 64
        and type(norm).__name__ == "GroupNormAct"
        and norm.num_groups == 32
        and norm.eps == 1e-5
        and isinstance(norm.act, nn.ReLU)
        and type(pool).__name__ == "MaxPool2dSame"
        and tuple(pool.kernel_size) == (3, 3)
        and tuple(pool.stride) == (2, 2)
    )


def patch_embed_fields(embed: Any, embed_dim: int) -> tuple[dict[str, Any], dict[str, str]]:
    """The :class:`ViTConfig` fields of a timm ``PatchEmbed`` or ``HybridEmbed`` (image and patch sizes, the
    stem) and the key renames its state dict needs, ``{timm prefix: vitlab prefix}``."""
    if type(embed).__name__ == "HybridEmbed":
        backbone, (ph, pw) = embed.backbone, embed.patch_size
        if ph != pw or embed.dynamic_img_pad or not embed.flatten or isinstance(embed.proj, nn.Identity):
            raise _unsupported("a HybridEmbed with non-square patches, padding, no projection or unflattened output")
        renames: dict[str, str] = {}
        if _is_resnet_stem(backbone):
            stem, reduction = "resnet_stem", 4
        elif _is_conv_stem(backbone, embed_dim) and conv_stem_convs(ph * 2 ** (convs := len(backbone) // 3)) == convs:
            stem, reduction = "conv_stem", 2**convs
            for i in range(convs):
                renames |= {
                    f"patch_embed.backbone.{3 * i}.": f"patch_embed.backbone.layers.{i}.conv.",
                    f"patch_embed.backbone.{3 * i + 1}.": f"patch_embed.backbone.layers.{i}.norm.",
                }
        else:
            raise _unsupported(
                "a HybridEmbed backbone other than the ResNetV2 'same' stem or a 3x3 stride-2 "
                "Conv2d/BatchNorm2d/ReLU stack widening to the token width"
            )
        return dict(
            img_size=tuple(embed.img_size),
            patch_size=ph * reduction,
            in_chans=embed.in_chans,
            patch_embed=stem,
            pad=False,
        ), renames
    _check_type(embed, "PatchEmbed", "patch_embed")
    if not isinstance(embed.norm, nn.Identity):
        raise _unsupported("a norm inside patch_embed")
    ph, pw = embed.patch_size
    if ph != pw:
        raise _unsupported(f"{ph}x{pw} patches")
    return dict(
        img_size=tuple(embed.img_size), patch_size=ph, in_chans=embed.proj.in_channels, pad=embed.dynamic_img_pad
    ), {}


def rename_prefixes(state: StateDict, renames: dict[str, str]) -> StateDict:
    """``state`` with each key starting with a ``renames`` prefix given that prefix's replacement."""
    if not renames:
        return state
    pattern = re.compile("^(" + "|".join(map(re.escape, renames)) + ")")
    return {pattern.sub(lambda m: renames[m.group(1)], k): v for k, v in state.items()}


def timm_config(module: nn.Module) -> dict[str, Any]:
    """The :class:`ViTConfig` fields of a timm ``VisionTransformer``, checking it is one vitlab can run."""
    _check_type(module, "VisionTransformer", "a model")
    pool = module.global_pool
    if pool not in _POOLS or module.attn_pool is not None:
        raise _unsupported(f"global_pool={pool!r}")
    if module.pool_include_prefix:
        raise _unsupported("pool_include_prefix=True")
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
    ``VisionTransformerRelPos``: :func:`~vitlab.interop.timm_relpos.from_timm_relpos`) computes, or a
    :class:`~vitlab.models.swin.SwinTransformer` for a timm ``SwinTransformer``
    (:func:`~vitlab.interop.timm_swin.from_timm_swin`).

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
            raise ValueError(
                "img_size does not apply to relative-position ViTs (their bias table is for one grid): "
                "build the timm model at the size you want and convert that"
            )
        from .timm_relpos import from_timm_relpos  # it builds on this module's checks

        return from_timm_relpos(module)
    if type(module).__name__ == "SwinTransformer":
        if img_size is not None:
            raise ValueError(
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
        raise ValueError(
            f"timm's VisionTransformer has no {', '.join(f'{k}={v!r}' for k, v in other.items())}; "
            f"it holds {', '.join(f'{k} in {v}' for k, v in _TIMM_KINDS.items())}"
        )
    state = vitlab_to_timm({k: v.detach() for k, v in model.state_dict().items()}, no_embed_class)
    if cfg.pre_norm:
        bias = state.pop("patch_embed.proj.bias")
        if bias.any():
            raise ValueError(
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
