"""timm ``VisionTransformerRelPos`` -> vitlab :class:`~vitlab.models.vit.VisionTransformer` with ``rel_pos``.

timm's relative-position ViT is a plain pre-norm ViT without absolute positions whose attention adds a
learned bias indexed by the 2-D offset of query and key (``rel_pos_type="bias"``: timm's ``RelPosBias``),
one table per block or one shared (``shared_rel_pos=True``). vitlab's ``rel_pos="per_block"`` /
``"shared"`` (:mod:`vitlab.layers.relative_position`) hold the same tables under the same names
(``blocks.{i}.attn.rel_pos.relative_position_bias_table``, ``shared_rel_pos.relative_position_bias_table``),
so the state dict maps as a plain ViT's does. The log-coordinate MLP bias (``rel_pos_type="mlp"``, timm's
default) and the res-post-norm blocks have no vitlab equivalent and are refused by name.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..errors import CheckpointError
from ..models.vit import VisionTransformer
from .keymaps import timm_to_vitlab
from .state import model_from_state
from .timm_encoder import check_encoder, encoder_fields, patch_embed_fields

_POOLS = {"avg": "mean", "token": "token"}


def _unsupported(what: str) -> CheckpointError:
    return CheckpointError(
        f"timm VisionTransformerRelPos with {what} has no vitlab equivalent: vitlab converts "
        f"rel_pos_type='bias' models with pre-norm blocks and avg or token pooling"
    )


def timm_relpos_config(module: nn.Module) -> dict[str, Any]:
    """The :class:`~vitlab.models.vit_config.ViTConfig` fields of a timm ``VisionTransformerRelPos``, checking vitlab
    computes the same."""
    if type(module).__name__ != "VisionTransformerRelPos":
        raise _unsupported(f"type {type(module).__name__}")
    vit: Any = module  # timm's attributes, which torch's Module stubs do not know
    if vit.global_pool not in _POOLS:
        raise _unsupported(f"global_pool={vit.global_pool!r}")
    tables = [vit.shared_rel_pos] if vit.shared_rel_pos is not None else [b.attn.rel_pos for b in vit.blocks]
    kinds = {type(t).__name__ for t in tables}
    if kinds != {"RelPosBias"}:
        raise _unsupported(f"relative positions {sorted(kinds)} (rel_pos_type='mlp' or none)")
    embed, _ = patch_embed_fields(vit.patch_embed, vit.embed_dim)
    if embed.get("patch_embed"):
        raise _unsupported("a hybrid patch embedding")
    eps = check_encoder(vit, "RelPosBlock", "RelPosAttention")
    use_fc_norm = not isinstance(vit.fc_norm, nn.Identity)
    return dict(
        **embed,
        **encoder_fields(vit),
        pos_embed="none",
        pool=_POOLS[vit.global_pool],
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
