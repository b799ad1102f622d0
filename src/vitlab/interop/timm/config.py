"""timm's ``config.json`` (what ``push_to_hf_hub`` / ``save_for_hf`` write beside ``model.safetensors``).

Keys: ``architecture`` (e.g. ``"vit_tiny_patch16_224"``), ``num_classes``, ``num_features``, ``global_pool``,
``model_args`` (arguments the model was built with beyond its architecture's, newer timm), ``label_names``
and ``pretrained_cfg`` (input size, interpolation, crop, mean, std). :func:`timm_fields` gives the
:class:`~vitlab.models.vit_config.ViTConfig` fields such a config says and the state dict does not: the number of
heads (from ``model_args``, else the architecture's family), the pooling, a non-square image size.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...errors import CheckpointError

# (size word, width) -> heads, as timm's model definitions set them (vision_transformer.py, deit.py,
# vision_transformer_hybrid.py, eva.py): vit_<size>_..., deit_<size>_..., deit3_<size>_... Each pair has one
# count across every name timm 1.0 registers but the ones in TIMM_HEADS_BY_NAME (checked against timm itself).
TIMM_HEADS: dict[tuple[str, int], int] = {
    ("tiny", 192): 3,
    ("small", 384): 6,
    ("small", 768): 8,
    ("xsmall", 256): 4,
    ("wee", 256): 4,
    ("dwee", 256): 4,
    ("pwee", 256): 4,
    ("dpwee", 256): 4,
    ("little", 320): 5,
    ("dlittle", 320): 5,
    ("medium", 512): 8,
    ("mediumd", 512): 8,
    ("betwixt", 640): 10,
    ("base", 768): 12,
    ("base", 896): 14,
    ("so150m", 896): 14,
    ("so150m2", 832): 13,
    ("large", 1024): 16,
    ("intern300m", 1024): 16,
    ("huge", 1280): 16,
    ("so400m", 1152): 16,
    ("giant", 1408): 16,
    ("giant", 1536): 24,
    ("giantopt", 1536): 16,
    ("gigantic", 1664): 16,
    ("1b", 2048): 16,
    ("3b", 3072): 24,
}
TIMM_HEADS_BY_NAME: dict[str, tuple[int, int]] = {  # name -> (width, heads)
    "vit_base_patch16_gap_224": (768, 16),
    "vit_huge_plus_patch16_dinov3": (1280, 20),
    "vit_huge_plus_patch16_dinov3_qkvb": (1280, 20),
}
_FAMILIES = ("vit", "deit", "deit3")
_POOLS = {"token": "token", "avg": "mean", "max": "max"}


def timm_heads(architecture: str, embed_dim: int) -> int | None:
    """The number of heads timm's ``architecture`` (a tag after ``.`` is ignored) has at width ``embed_dim``;
    None for a name outside timm's ViT families or a width its family does not define."""
    name = architecture.split(".", 1)[0]
    if name in TIMM_HEADS_BY_NAME:
        width, heads = TIMM_HEADS_BY_NAME[name]
        return heads if width == embed_dim else None
    family, _, rest = name.partition("_")
    if family not in _FAMILIES or not rest:
        return None
    return TIMM_HEADS.get((rest.split("_", 1)[0], embed_dim))


def timm_fields(config: Mapping[str, Any], embed_dim: int | None) -> tuple[dict[str, Any], dict[str, str]]:
    """ViTConfig fields a timm ``config.json`` gives, and how each was read (``{field: why}``, said to the user).

    ``num_heads``: ``model_args["num_heads"]``, else the architecture's (see :func:`timm_heads`) at
    ``embed_dim`` (the state dict's width); ``pool``: ``global_pool``; ``img_size``: ``model_args["img_size"]``.
    Raises :class:`~vitlab.errors.CheckpointError` for a pooling or activation vitlab has no equivalent of.
    """
    args = config.get("model_args") if isinstance(config.get("model_args"), Mapping) else {}
    assert isinstance(args, Mapping)
    out: dict[str, Any] = {}
    notes: dict[str, str] = {}
    architecture = str(config.get("architecture") or (config.get("pretrained_cfg") or {}).get("architecture") or "")
    if isinstance(args.get("num_heads"), int):
        out["num_heads"] = args["num_heads"]
    elif architecture and embed_dim is not None:
        heads = timm_heads(architecture, embed_dim)
        if heads is not None:
            out["num_heads"] = heads
            notes["num_heads"] = f"{heads} (timm's {architecture.split('.', 1)[0]} at width {embed_dim})"
    pool = args.get("global_pool", config.get("global_pool"))
    if pool not in (None, ""):
        if pool not in _POOLS:
            raise CheckpointError(
                f"timm global_pool={pool!r} has no vitlab equivalent (vitlab pools token, avg or max)"
            )
        out["pool"] = _POOLS[pool]
    act = args.get("act_layer")
    if act not in (None, "gelu"):
        raise CheckpointError(f"timm act_layer={act!r}: vitlab's MLP uses exact GELU; no equivalent for this one")
    size = args.get("img_size")
    if isinstance(size, int) or (isinstance(size, (list, tuple)) and len(size) == 2):
        out["img_size"] = (size, size) if isinstance(size, int) else tuple(int(s) for s in size)
    return out, notes


def timm_label_names(config: Mapping[str, Any], num_classes: int) -> list[str] | None:
    """The class names of a timm ``config.json`` (``label_names``: a list, or ``{index: name}``) when there is
    one per output."""
    labels = config.get("label_names")
    if isinstance(labels, Mapping):
        labels = [labels.get(str(i), labels.get(i)) for i in range(num_classes)]
    if isinstance(labels, (list, tuple)) and len(labels) == num_classes and all(x is not None for x in labels):
        return [str(x) for x in labels]
    return None
