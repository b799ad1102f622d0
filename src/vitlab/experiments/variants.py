"""How a cell's axis values become its ViT: the config overrides of each variant axis
(:data:`VARIANT_OVERRIDES`, :func:`vit_overrides`), token merging for ``tome`` (:func:`with_tome`), and
why a combination cannot be built (:func:`skip_reason`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..models import TokenMergingViT, VisionTransformer, ViTConfig, apply_tome, front_loaded, get_config
from ..models.vit_config import BIASED_KINDS, STEM_REDUCTION
from .axes import variant_words
from .config import CompareConfig

# The ViT's patch embedding per ``stem`` value (``patch``: the registered model's own).
STEMS = {"conv": "conv_stem", "resnet": "resnet_stem"}

# The ViT's relative position bias per ``position`` value, and its absolute table (``abs``: the registered one).
REL_POS = {"rel": "per_block", "rel-shared": "shared"}

POS_EMBED = {"sincos": "sincos2d", "rowcol": "rowcol", "rope": "rope"}


def attention_overrides(kind: str, vit: ViTConfig) -> dict[str, Any]:
    """The ViT config fields that give ``vit`` attention ``kind``, sized to its patch grid (h x w
    tokens, N = h w): ``window`` -- windows of side min(h, w) // 2 (at least 1; shifted in every other
    block), class and register tokens dropped for mean pooling, which windows need; ``lowrank`` --
    keys and values projected to N // 2 rows; ``latent`` -- N // 4 latent tokens; ``linear``, ``lsa``,
    ``sparse`` (a band of the grid's width, every row-width-th position and the prefix tokens) -- the
    kind alone. ``full`` (the registered model's own attention) and ``tome`` (merging is applied after
    training) change nothing."""
    if kind in ("full", "tome"):
        return {}
    gh, gw = vit.grid
    n = gh * gw
    sized: dict[str, Any] = {
        "window": {"window_size": max(1, min(gh, gw) // 2)},
        "lowrank": {"lowrank_k": max(1, n // 2)},
        "latent": {"num_latents": max(1, n // 4)},
    }.get(kind, {})
    if kind == "window" and (vit.class_token or vit.reg_tokens):
        sized.update(class_token=False, reg_tokens=0, **({"pool": "mean"} if vit.pool == "token" else {}))
    return {"attention": kind, **sized}


def _changed(vit: ViTConfig, wanted: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``wanted`` whose value ``vit`` does not already have."""
    return {k: v for k, v in wanted.items() if getattr(vit, k) != v}


def position_overrides(value: str, vit: ViTConfig) -> dict[str, Any]:
    """The ViT config fields for ``position`` ``value``: ``abs`` keeps (or restores, as ``learned``)
    absolute positions without a relative bias; ``sincos`` / ``rowcol`` / ``rope`` put in fixed 2-D
    sinusoids / learned row + column vectors / rotary angles; ``rel`` / ``rel-shared`` replace them by a
    relative position bias in every block / shared by all; ``none`` removes both."""
    absolute = (vit.pos_embed if vit.pos_embed != "none" else "learned") if value == "abs" else "none"
    return _changed(vit, {"pos_embed": POS_EMBED.get(value, absolute), "rel_pos": REL_POS.get(value, "none")})


def stem_overrides(value: str, vit: ViTConfig) -> dict[str, Any]:
    """The ViT config fields for ``stem`` ``value``: ``patch`` the registered patch embedding, else
    :data:`STEMS` ``[value]``."""
    return {} if value == "patch" else _changed(vit, {"patch_embed": STEMS[value]})


def pool_overrides(value: str, vit: ViTConfig) -> dict[str, Any]:
    """The ViT config fields for ``pool`` ``value``: ``token`` reads a class token (added when the
    registered model has none); ``mean`` / ``max`` pool the patch tokens."""
    return _changed(vit, {"pool": value, **({"class_token": True} if value == "token" else {})})


def tome_schedule(num_patches: int, depth: int) -> list[int]:
    """Tokens merged per block for the ``tome`` variant: half the patch tokens in all, front-loaded
    (:func:`~vitlab.models.front_loaded`, more merges in early blocks), at least one per block."""
    return front_loaded(max(1, round(num_patches / (2 * depth))), depth)


def with_tome(model: VisionTransformer, img_size: tuple[int, int]) -> TokenMergingViT:
    """``model`` merging tokens by :func:`tome_schedule` for images of ``img_size``."""
    return apply_tome(model, tome_schedule(math.prod(model.grid_size(*img_size)), len(model.blocks)))


def switch_overrides(name: str) -> Callable[[str, ViTConfig], dict[str, Any]]:
    """The overrides of a pitfall switch ``name`` (``block``, ``norm``, ``mask``, ``stride``) for a value."""

    def overrides(value: str, vit: ViTConfig) -> dict[str, Any]:
        choices: dict[str, dict[str, Any]] = {
            "block": {"block": value},
            "norm": {"block_norm": value},
            "mask": {"causal": value == "causal"},
            "stride": {"patch_stride": None if value == "patch" else int(value) if value.isdigit() else value},
        }
        return _changed(vit, choices[name])

    return overrides


VARIANT_OVERRIDES: dict[str, Callable[[str, ViTConfig], dict[str, Any]]] = {
    "stem": stem_overrides,
    "position": position_overrides,
    "pool": pool_overrides,
    **{name: switch_overrides(name) for name in ("block", "norm", "mask", "stride")},
    "attention": attention_overrides,  # last: window attention fits the tokens the others leave
}


def vit_overrides(config: CompareConfig, shape: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The ViT's config overrides in a cell with axis ``values``: its patch size, padding (only with
    ``config.pad`` and a patch that does not divide the image), then stem, positions, pooling and
    attention for those axes the study varies (see :data:`VARIANT_OVERRIDES`)."""
    patch = values["patch"]
    overrides: dict[str, Any] = {"patch_size": patch}
    if config.pad and any(side % patch for side in shape["img_size"]):
        overrides["pad"] = True
    for name, fields_for in VARIANT_OVERRIDES.items():
        if name in values:
            overrides.update(fields_for(values[name], get_config(config.vit_name, **shape, **overrides)))
    return overrides


def skip_reason(config: CompareConfig, shape: dict[str, Any], values: dict[str, Any]) -> str | None:
    """Why the ViT of a cell with axis ``values`` cannot be built or trained as the study asks (a
    sentence), or ``None`` when it can: a stem that cannot reduce to the patch size, a relative
    position bias on attention that takes none (or under token merging or pretraining, which move
    tokens), window attention with a class or distillation token, MAE with sparse attention."""
    patch, stem, position = values["patch"], values.get("stem", "patch"), values.get("position", "abs")
    attention, pretrain = values.get("attention", "full"), values.get("pretrain", "none")
    stem_words, reduction = variant_words("stem", stem), STEM_REDUCTION.get(STEMS.get(stem, ""), 1)
    if patch % reduction:
        return (
            f"the {stem_words} reduces the image by {reduction} before the patch projection, so it needs a "
            f"patch size that is a multiple of {reduction}, not {patch}"
        )
    if stem != "patch" and any(side % patch for side in shape["img_size"]):
        return f"the {stem_words} cannot pad the image to a multiple of patch {patch}"
    if position in REL_POS:
        rel = variant_words("position", position)
        if attention not in ("tome", *BIASED_KINDS):
            return f"{rel} is added to the scores of {', '.join(BIASED_KINDS)} attention, not {attention} attention"
        if attention == "tome":
            return f"token merging averages tokens from different places, which {rel} (by grid offsets) cannot follow"
        if pretrain != "none":
            moved = "a random subset of the patches" if pretrain == "mae" else "crops of other sizes"
            return f"{pretrain.upper()} pretraining runs the encoder on {moved}, which {rel} (one grid) cannot take"
    if attention == "window":
        if values.get("pool") == "token":
            return "window attention tiles the patch grid, where a class token has no place: pool by the mean"
        if values.get("distill") == "cnn":
            return "window attention tiles the patch grid, where a distillation token has no place"
    if attention == "sparse" and pretrain == "mae":
        return (
            "MAE pretraining runs the encoder on a random subset of the patches, where sparse attention's "
            "pattern is undefined"
        )
    stride = values.get("stride", "patch")
    if stride != "patch" and int(stride) >= patch:
        return f"stride {stride} does not make patch {patch}'s windows overlap (a stride below the patch does)"
    if stride != "patch" and (stem != "patch" or any(side % patch for side in shape["img_size"])):
        return f"overlapping windows (stride {stride}) are cut by the patchify stem from an image the patch divides"
    if stride != "patch" and pretrain == "mae":
        return "MAE drops patches, which overlapping windows do not stand for one to one"
    if values.get("mask") == "causal" and attention not in ("full", "tome"):
        return f"a causal mask is laid on full attention's scores, not {attention} attention's"
    return None
