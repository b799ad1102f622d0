"""What every timm ViT family shares, read and checked the same way: the encoder's blocks
(:func:`check_encoder`, :func:`encoder_fields`) and the patch embedding (:func:`patch_embed_fields`).

:mod:`~vitlab.interop.timm`'s ``VisionTransformer`` and
``VisionTransformerRelPos`` readers build on them; what vitlab does not run raises :func:`unsupported`'s
:class:`~vitlab.errors.CheckpointError` naming it.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ...errors import CheckpointError
from ...layers.conv_stem import conv_stem_widths
from ...layers.hybrid_embed import conv_stem_convs

TIMM_LAYERNORM_EPS = 1e-6


def unsupported(what: str) -> CheckpointError:
    """The error for a timm ViT with ``what``, which vitlab does not run."""
    return CheckpointError(
        f"timm VisionTransformer with {what} has no vitlab equivalent: vitlab converts pre-norm "
        f"LayerNorm/GELU ViTs with token, avg or max pooling"
    )


def check_type(module: nn.Module, name: str, where: str) -> None:
    if type(module).__name__ != name:
        raise unsupported(f"{where} of type {type(module).__name__} (expected timm's {name})")


def _norm_eps(module: nn.Module, where: str) -> float | None:
    """The eps of a LayerNorm with weight and bias, ``None`` for ``nn.Identity``."""
    if isinstance(module, nn.Identity):
        return None
    if not isinstance(module, nn.LayerNorm) or module.weight is None or module.bias is None:
        raise unsupported(f"{where} = {type(module).__name__} (vitlab uses LayerNorm with weight and bias)")
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
        raise unsupported(f"LayerNorms of several eps {sorted(eps)}")
    for i, block in enumerate(module.blocks):
        check_type(block, block_type, f"blocks.{i}")
        check_type(block.attn, attn_type, f"blocks.{i}.attn")
        check_type(block.mlp, "Mlp", f"blocks.{i}.mlp")
        if not isinstance(getattr(block.attn, "norm", nn.Identity()), nn.Identity) or not isinstance(
            block.mlp.norm, nn.Identity
        ):
            raise unsupported(f"scale_attn_norm / scale_mlp_norm in blocks.{i}")
        if getattr(block.attn, "gate", None) is not None:
            raise unsupported(f"a gated attention in blocks.{i}")
        if any(layer.bias is None for layer in (block.attn.proj, block.mlp.fc1, block.mlp.fc2)):
            raise unsupported(f"proj_bias=False in blocks.{i}")
        act = block.mlp.act
        if not isinstance(act, nn.GELU) or act.approximate != "none":
            raise unsupported(f"act_layer {act} in blocks.{i} (vitlab's MLP uses exact GELU)")
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
            raise unsupported("a HybridEmbed with non-square patches, padding, no projection or unflattened output")
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
            raise unsupported(
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
    check_type(embed, "PatchEmbed", "patch_embed")
    if not isinstance(embed.norm, nn.Identity):
        raise unsupported("a norm inside patch_embed")
    ph, pw = embed.patch_size
    if ph != pw:
        raise unsupported(f"{ph}x{pw} patches")
    return dict(
        img_size=tuple(embed.img_size), patch_size=ph, in_chans=embed.proj.in_channels, pad=embed.dynamic_img_pad
    ), {}
