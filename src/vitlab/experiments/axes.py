"""The axis vocabulary of a comparison: the ViT-only variant axes with their defaults
(:data:`VARIANTS`) and the values each may take (:data:`VARIANT_CHOICES`), the field each axis sets
(:data:`VARIANT_FIELDS`), the CNNs a ViT may meet (:data:`CNN_CHOICES`), an :class:`Axis` of the grid,
and every value in words (:func:`variant_words`, :func:`augment_words`, :func:`phrase_axes`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .textbook import TEXTBOOK_CNN
from .training import METHODS

# The ViT-only variant axes of a comparison and the value each takes when it is not studied.
VARIANTS: dict[str, Any] = {
    "attention": "full",
    "pretrain": "none",
    "distill": "none",
    "position": "abs",
    "stem": "patch",
    "pool": "mean",
    "block": "prenorm",
    "norm": "layernorm",
    "mask": "none",
    "stride": "patch",
    "lr": None,
    "warmup": None,
    "tune": "full",
}


# The values each variant axis (see VARIANTS, with their defaults) may take.
VARIANT_CHOICES: dict[str, tuple[str, ...]] = {
    "attention": ("full", "window", "linear", "lowrank", "latent", "lsa", "sparse", "tome"),
    "pretrain": ("none", *METHODS),
    "distill": ("none", "cnn"),
    "position": ("abs", "sincos", "rowcol", "rope", "rel", "rel-shared", "none"),
    "stem": ("patch", "conv", "resnet"),
    "pool": ("mean", "token", "max"),
    "block": ("prenorm", "postnorm"),
    "norm": ("layernorm", "batchnorm"),
    "mask": ("none", "causal"),
}

# ViT-only axes of numbers: the ``stride`` of the patch windows ("patch" or pixels), and training settings
# the ViT alone takes (None: the recipe's), each with the TrainConfig field it sets.
VIT_TRAINING = {"lr": "lr", "warmup": "warmup_epochs"}


# The CNNs a ViT may meet (the ``cnn`` axis), in words.
CNN_WORDS = {"matched": "size-matched", "textbook": "textbook-size plain"}


# The CNNs a ViT may meet: matched to its parameter count, or a fixed (model, overrides).
CNN_CHOICES: dict[str, tuple[str, dict[str, Any]] | None] = {"matched": None, "textbook": TEXTBOOK_CNN}


# The augment axis value that keeps the recipe's own augmentation.
RECIPE_AUGMENT = "recipe"

_VARIANT_WORDS = {
    ("attention", "tome"): "full attention + ToMe",
    ("pretrain", "none"): "from scratch",
    ("pretrain", "mae"): "MAE-pretrained",
    ("pretrain", "dino"): "DINO-pretrained",
    ("distill", "none"): "no teacher",
    ("distill", "cnn"): "distilled from the CNN",
    ("position", "abs"): "absolute positions",
    ("position", "sincos"): "2-D sinusoidal positions",
    ("position", "rowcol"): "row + column positions",
    ("position", "rope"): "rotary positions",
    ("position", "rel"): "a relative position bias per block",
    ("position", "rel-shared"): "one shared relative position bias",
    ("position", "none"): "no positions",
    ("stem", "patch"): "patchify stem",
    ("stem", "conv"): "conv stem",
    ("stem", "resnet"): "ResNet stem",
    ("pool", "token"): "class-token pooling",
    ("pool", "mean"): "mean pooling",
    ("pool", "max"): "max pooling",
    ("block", "prenorm"): "pre-norm blocks",
    ("block", "postnorm"): "post-norm blocks",
    ("norm", "layernorm"): "LayerNorm in the blocks",
    ("norm", "batchnorm"): "BatchNorm in the blocks",
    ("mask", "none"): "no mask",
    ("mask", "causal"): "a causal mask",
    ("stride", "patch"): "tiling patches",
    ("lr", None): "the recipe's learning rate",
    ("warmup", None): "the recipe's warmup",
    ("tune", "full"): "full fine-tuning",
    ("tune", "head"): "a frozen encoder (head only)",
    ("tune", "lora"): "LoRA adapters",
    ("tune", "bitfit"): "BitFit (biases and norms)",
    ("tune", "prompt"): "prompt tuning",
}


VARIANT_FIELDS = {
    "attention": "attention",
    "pretrain": "init",
    "distill": "teacher",
    "position": "rel_pos",
    "stem": "patch_embed",
    "pool": "pool",
    "block": "block",
    "norm": "block_norm",
    "mask": "causal",
    "stride": "patch_stride",
    **VIT_TRAINING,
    "tune": "tune",
}


@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: ``name`` labels it in results and tables; ``field`` is the
    :class:`~vitlab.engine.TrainConfig` field it sets for both models, or, with ``only="vit"``, what
    it sets for the ViT alone (a config field such as ``patch_size``, or a training setting such as
    ``init``; the CNN is then matched to the ViT at each value), or with ``only="cnn"`` which CNN the
    ViT meets (the ViT is then trained once for all its values)."""

    name: str
    field: str
    values: tuple[Any, ...]
    only: str | None = None


def variant_words(name: str, value: Any) -> str:
    """A variant axis value in words: ``window attention``, ``full attention + ToMe``, ``MAE-pretrained``,
    ``distilled from the CNN``, ``a relative position bias per block``, ``conv stem``, ``class-token pooling``,
    ``overlapping windows every 4 px``, ``lr 0.003``, ``no warmup``, ``2 warmup epochs``."""
    if (name, value) in _VARIANT_WORDS:
        return _VARIANT_WORDS[name, value]
    if name == "stride":
        return f"overlapping windows every {value} px"
    if name == "lr":
        return f"lr {value:g}"
    if name == "tune" and str(value).startswith("last"):
        return f"the last {str(value).removeprefix('last-') or 'K'} blocks tuned"
    if name == "warmup":
        return "no warmup" if value == 0 else f"{value:g} warmup epoch{'s' if value != 1 else ''}"
    return f"{value} {name}"


def augment_words(value: str) -> str:
    """An augment axis value in words: ``no augmentation``, ``light augmentation``, ``the recipe's augmentation``."""
    if value == "none":
        return "no augmentation"
    return "the recipe's augmentation" if value == RECIPE_AUGMENT else f"{value} augmentation"


def join_words(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def phrase_axes(axes: dict[str, Any]) -> list[str]:
    """Each axis but rows and seed in words, patch first: ``patch 2``, ``no augmentation``,
    ``window attention``."""
    parts = []
    for name, value in sorted(axes.items(), key=lambda item: item[0] != "patch"):
        if name in ("rows", "seed"):
            continue
        if name == "patch":
            parts.append(f"patch {value}")
        elif name == "augment":
            parts.append(augment_words(value))
        elif name in VARIANTS:
            parts.append(variant_words(name, value))
        elif name == "cnn":
            parts.append(f"the {CNN_WORDS[value]} CNN")
        else:
            parts.append(f"{name} {value}")
    return parts
