"""ViT against a CNN of the same size: ``run_compare(CompareConfig) -> CompareResult``.

The textbook's mini-project as one grid. Each **cell** is one combination of axis values (seed,
training rows, augmentation preset, ViT patch size, ...); in it a ViT and a CNN train with the same
data, seed, recipe (optimiser, schedule, epochs) and augmentation. The CNN is sized by
:func:`~vitlab.models.cnn_for_budget` to the parameter count of the ViT *at that patch size* and must
land within ``param_tolerance`` of it (±15% by default).

The grid is a list of :class:`Axis`. An axis either sets a :class:`~vitlab.engine.TrainConfig` field
for both models (rows, augment, seed) or applies to one model only: the ViT's patch size and the
variant axes of :data:`VARIANTS`, each in the grid only when the study lists something besides its
default, and the CNN the ViT meets (``cnns``: ``matched``, the default, or ``textbook``, the plain
convnet at the textbook's size of :data:`~vitlab.experiments.textbook.TEXTBOOK_CNN`):

- ``attention``: ``full`` (the registered model), a cheaper kind from :mod:`vitlab.layers.attention`
  (``window``, ``linear``, ``lowrank``, ``latent``, ``lsa``, ``sparse``; sized to the patch grid by
  :func:`attention_overrides`), or ``tome``: the full-attention model, trained once, evaluated with
  token merging (:func:`tome_schedule`) -- no retraining, so accuracy, speed and memory say what
  merging costs and saves.
- ``pretrain``: ``none`` (from scratch), ``mae`` or ``dino``: the ViT is pretrained without labels
  (:func:`vitlab.tasks.ssl.pretrain`, once per seed and ViT shape) and fine-tuned from it with layer-wise
  learning-rate decay on the cell's labelled rows.
- ``distill``: ``none`` or ``cnn``: the ViT gets a DeiT distillation token and learns from the cell's
  own size-matched CNN (trained first, same rows and seed) as its teacher.
- ``position``: ``abs`` (the registered model's absolute positions), ``sincos`` (fixed 2-D sinusoids),
  ``rowcol`` (learned row + column vectors), ``rope`` (rotary angles on queries and keys), ``rel`` (a
  relative position bias in every block, no absolute positions), ``rel-shared`` (one bias table for all
  blocks) or ``none``.
- ``stem``: ``patch`` (the registered patchify embedding), ``conv`` (Xiao et al.'s stride-2 conv stem)
  or ``resnet`` (timm's ResNetV2 stem, as in its hybrid ViTs) before the patch projection.
- ``pool``: ``mean`` (over the patch tokens), ``token`` (a class token, read by the head) or ``max``.
- the texts' pitfalls as switches: ``block`` (``prenorm`` or ``postnorm``), ``norm`` (``layernorm`` or
  ``batchnorm`` inside the blocks), ``mask`` (``none`` or ``causal``), ``stride`` (``patch``: tiling
  patches, or a number of pixels below the patch: an overlapping tokenizer).
- ViT-only training settings: ``lr`` and ``warmup`` (epochs of linear warmup), ``None`` for the recipe's;
  the CNN keeps the recipe's, so it is trained once for all their values.

A run whose loss stops being finite is recorded as ``diverged``, its accuracies those of a constant
guess of the validation split's most frequent class (:func:`diverged_record`), and the study goes on.
The CNN of each cell is matched to that cell's ViT, so a variant that changes the ViT's parameter
count (a stem, a bias table, a class token) may change the CNN's widths. A combination of values that
cannot be built (a stem that cannot reduce to the patch size, a relative bias on attention that forms
no bias-able scores, window attention with a class or distillation token, ...) is skipped, with the
reason in :attr:`Plan.skipped` and the report (:func:`skip_reason`); a study whose every combination
is skipped is refused before any training.

With ``robustness`` every run's model is also scored with patches masked and centre-cropped after its
training (:mod:`~vitlab.explain.robustness`), in the run's own task.

A run is identified by what it trains, so when two patch sizes give the ViT the same parameter count
(as patches 2 and 4 do for ``vit-digits``) the matched CNN is trained once per (seed, rows, augment)
and paired with both. Every run's record also holds its forward cost on a validation batch
(images per second, peak memory), measured after the grid in this process.

Runs are independent but for what one makes for another (a teacher, a pretrained encoder, a trained
model that ToMe evaluates): :func:`execute` groups such runs into one task and hands the tasks to an
executor (:mod:`~vitlab.experiments.executors`: this machine's cores or a Ray cluster). Every run
seeds itself from its own plan entry, so the records do not depend on where or in which order the
tasks ran (at a fixed number of torch threads per run: the thread count changes float rounding).

Nothing is written unless ``out_dir`` is set; then :func:`~vitlab.experiments.report.write_report`
writes ``results.json``, ``report.md`` and the figures there.
"""

from __future__ import annotations

import io
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, TypeVar, cast

import torch
from torch import nn

from ..data import NORMALIZATIONS, DataSplits, ImageDataset, load_dataset
from ..data.augment import PRESETS, normalize
from ..data.preprocess import Preprocess
from ..data.records import SOURCES as PHOTO_SOURCES
from ..errors import ConfigError, DivergenceError
from ..explain import attention_examples
from ..explain.probes import permutation_probe
from ..explain.robustness import Probes, robustness
from ..models import (
    TokenMergingViT,
    VisionTransformer,
    ViTConfig,
    apply_tome,
    build_registered,
    cnn_for_budget,
    count_params,
    front_loaded,
    get_config,
)
from ..models.vit import BIASED_KINDS, STEM_REDUCTION
from ..ops.patches import divisibility_error
from ..tasks.classify.train import resize_splits
from .executors import Executor, LocalExecutor
from .figures import CNN_WORDS, RECIPE_AUGMENT, VARIANTS, variant_words
from .files import open_study, write_file
from .report import TRAIN_EVAL_ROWS, skipped_summary, write_report
from .textbook import PRESET, TEXTBOOK_CNN
from .training import (
    DISTILL_KINDS,
    IMAGE_SETS,
    METHODS,
    RECIPES,
    TrainConfig,
    TrainResult,
    classification_report,
    forward_costs,
    predict_logits,
    pretrain_run,
    train_run,
)

T = TypeVar("T")

# Per-dataset defaults: (ViT, CNN family, patch sizes). 28x28 data gets the textbook's model.
DEFAULT_MODELS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "digits": ("vit-digits", "cnn-digits", (2, 4)),
}
FALLBACK_MODELS = ("vit-seed", "cnn-seed", (7,))
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
# The ViT's patch embedding per ``stem`` value (``patch``: the registered model's own).
STEMS = {"conv": "conv_stem", "resnet": "resnet_stem"}
# The ViT's relative position bias per ``position`` value, and its absolute table (``abs``: the registered one).
REL_POS = {"rel": "per_block", "rel-shared": "shared"}
POS_EMBED = {"sincos": "sincos2d", "rowcol": "rowcol", "rope": "rope"}
# The CNNs a ViT may meet: matched to its parameter count, or a fixed (model, overrides).
CNN_CHOICES: dict[str, tuple[str, dict[str, Any]] | None] = {"matched": None, "textbook": TEXTBOOK_CNN}
# Named studies: CompareConfig fields that --preset NAME starts from.
STUDY_PRESETS: dict[str, dict[str, Any]] = {"textbook": PRESET}


MAX_RUNS = 100_000
"""The most runs one study plans (checked before anything is planned or allocated)."""


@dataclass
class CompareConfig:
    """One ViT-versus-CNN study.

    ``rows``: training-set sizes (``None`` = the whole training pool). ``patches``: ViT patch sizes
    (each must divide the image side, unless ``pad``: then the ViT zero-pads the image, bottom and
    right, to a multiple of the patch). ``augment``: augmentation presets, or ``"recipe"`` for the
    recipe's own augmentation (the report says what it is). ``seeds``: repetitions of
    every cell, seeds ``0 .. seeds-1`` (both models of a cell share the seed, hence the data split
    and the order of batches). ``recipe``: the :data:`~vitlab.engine.RECIPES` entry both models train
    with, for ``epochs`` epochs. ``vit`` / ``cnn``: registered model names; ``None`` picks them per
    dataset (``vit-digits`` / ``cnn-digits`` for digits, ``vit-seed`` / ``cnn-seed`` otherwise), and
    ``patches=None`` likewise ((2, 4) for digits, (7,) otherwise). The CNN keeps its family's depth
    and block settings and gets the widths that match the ViT's parameter count. ``cnns``: the CNNs
    each ViT meets, from :data:`CNN_CHOICES` (``matched``: that CNN; ``textbook``: the plain convnet
    at the textbook's size). ``normalization``: ``standardize`` (by the training rows' per-channel
    mean and std) or ``unit`` (pixels as loaded, in [0, 1], as the textbook feeds them).
    ``attention`` / ``pretrain`` / ``distill`` / ``position`` / ``stem`` / ``pool``: the ViT variants to
    study (see the module doc);
    ``pretrain_epochs``, ``pretrain_images`` (``all`` images of the dataset, labels unused, or the
    ``train`` pool only) and ``layer_decay`` set the pretraining and fine-tuning; ``distill_kind``
    (``soft`` / ``hard``), ``distill_temperature`` and ``distill_alpha`` the distillation.
    ``robustness``: score every trained model with a share ``mask_fractions`` of its patches masked
    and with centre crops of ``crop_fractions`` of the side (see :mod:`~vitlab.explain.robustness`).
    ``block`` / ``norm`` / ``mask`` / ``stride``: the pitfall switches to study; ``lr`` / ``warmup``: the
    ViT's learning rates and warmup epochs (``None``: the recipe's). ``permute``: score every trained model
    with its patches shuffled (:func:`~vitlab.explain.probes.permutation_probe` on up to
    :data:`PERMUTE_IMAGES` held-out images; ViTs with and without their positions). ``train_eval``: also
    score the chosen weights on the training rows in eval mode (:func:`eval_mode_train_accuracy`).
    ``out_dir``: where the report goes (the CLI uses ``runs/<name>``); ``None`` writes nothing.
    ``device``: as :class:`~vitlab.engine.TrainConfig` (``auto`` = CUDA when present). ``preset``:
    the :data:`STUDY_PRESETS` entry the study started from (see :meth:`from_preset`), if any.
    """

    name: str = "compare"
    dataset: str = "digits"
    data_dir: str | None = None
    image_size: int | None = None
    rows: list[int | None] = field(default_factory=lambda: [300, None])
    patches: list[int] | None = None
    pad: bool = False
    augment: list[str] = field(default_factory=lambda: ["none", RECIPE_AUGMENT])
    seeds: int = 1
    epochs: int = 40
    recipe: str = "default"
    vit: str | None = None
    cnn: str | None = None
    cnns: list[str] = field(default_factory=lambda: ["matched"])
    normalization: str = "standardize"
    param_tolerance: float = 0.15
    attention: list[str] = field(default_factory=lambda: [VARIANTS["attention"]])
    pretrain: list[str] = field(default_factory=lambda: [VARIANTS["pretrain"]])
    distill: list[str] = field(default_factory=lambda: [VARIANTS["distill"]])
    position: list[str] = field(default_factory=lambda: [VARIANTS["position"]])
    stem: list[str] = field(default_factory=lambda: [VARIANTS["stem"]])
    pool: list[str] = field(default_factory=lambda: [VARIANTS["pool"]])
    block: list[str] = field(default_factory=lambda: [VARIANTS["block"]])
    norm: list[str] = field(default_factory=lambda: [VARIANTS["norm"]])
    mask: list[str] = field(default_factory=lambda: [VARIANTS["mask"]])
    stride: list[str] = field(default_factory=lambda: [VARIANTS["stride"]])
    lr: list[float | None] = field(default_factory=lambda: [VARIANTS["lr"]])
    warmup: list[float | None] = field(default_factory=lambda: [VARIANTS["warmup"]])
    pretrain_epochs: int = 40
    pretrain_images: str = "train"
    layer_decay: float = 0.75
    distill_kind: str = "soft"
    distill_temperature: float = 4.0
    distill_alpha: float = 0.5
    robustness: bool = False
    permute: bool = False
    train_eval: bool = False
    mask_fractions: list[float] = field(default_factory=lambda: list(Probes().masks))
    crop_fractions: list[float] = field(default_factory=lambda: list(Probes().crops))
    out_dir: str | None = None
    device: str = "auto"
    preset: str | None = None

    @classmethod
    def from_preset(cls, preset: str, **overrides: Any) -> CompareConfig:
        """The study :data:`STUDY_PRESETS` ``[preset]`` with ``overrides`` on top (its name by default)."""
        if preset not in STUDY_PRESETS:
            raise ConfigError(f"unknown preset {preset!r}: choose one of {list(STUDY_PRESETS)}")
        return cls(**{"name": preset, **STUDY_PRESETS[preset], **overrides, "preset": preset})

    def __post_init__(self) -> None:
        vit, cnn, patches = DEFAULT_MODELS.get(self.dataset, FALLBACK_MODELS)
        self.vit = self.vit or vit
        self.cnn = self.cnn or cnn
        self.patches = list(self.patches) if self.patches is not None else list(patches)
        self.rows, self.augment, self.cnns = list(self.rows), list(self.augment), list(self.cnns)
        for name in VARIANTS:
            setattr(self, name, list(getattr(self, name)))
        for name in ("rows", "patches", "augment", "cnns", *VARIANTS):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"{name} is empty: give at least one value")
            if len(set(values)) != len(values):
                raise ConfigError(f"{name} repeats a value: {values}; list each once")
        if any(r is not None and (int(r) != r or r < 1) for r in self.rows):
            raise ConfigError(f"rows must be positive image counts or None (the full pool), got {self.rows}")
        if any(int(p) != p or p < 1 for p in self.patches):
            raise ConfigError(f"patches must be positive integers, got {self.patches}")
        unknown = [a for a in self.augment if a not in (*PRESETS, RECIPE_AUGMENT)]
        if unknown:
            raise ConfigError(
                f"unknown augment preset(s) {unknown}: choose from {PRESETS} or "
                f"{RECIPE_AUGMENT!r} (the recipe's own augmentation)"
            )
        for name, choices in (*VARIANT_CHOICES.items(), ("cnns", tuple(CNN_CHOICES))):
            unknown = [v for v in getattr(self, name) if v not in choices]
            if unknown:
                raise ConfigError(f"unknown {name} value(s) {unknown}: choose from {choices}")
        self.stride = [str(v) for v in self.stride]
        if any(v != "patch" and not (v.isdigit() and int(v) > 0) for v in self.stride):
            raise ConfigError(f"stride values are 'patch' or a number of pixels, e.g. patch,4; got {self.stride}")
        for name, field_name in VIT_TRAINING.items():
            values = getattr(self, name)
            if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in values):
                raise ConfigError(f"{name} values are numbers (or null: the recipe's), got {values}")
            for value in values:  # each within the training config's own range
                if value is not None:
                    TrainConfig.from_recipe(self.recipe, **{field_name: value})
        if self.normalization not in NORMALIZATIONS:
            raise ConfigError(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")
        if self.preset is not None and self.preset not in STUDY_PRESETS:
            raise ConfigError(f"unknown preset {self.preset!r}: choose one of {list(STUDY_PRESETS)}")
        grid_bound = sorted({"window", "lowrank"} & set(self.attention))
        if grid_bound and set(self.pretrain) - {"none"}:
            raise ConfigError(
                f"--pretrain {','.join(self.pretrain)} feeds the encoder visible tokens only (MAE) or "
                f"crops of other sizes (DINO), which {' and '.join(grid_bound)} attention, built for "
                f"the whole patch grid, cannot take: study them without pretraining (--pretrain none)"
            )
        self.mask_fractions, self.crop_fractions = list(self.mask_fractions), list(self.crop_fractions)
        if not all(isinstance(f, (int, float)) and 0 <= f < 1 for f in self.mask_fractions):
            raise ConfigError(
                f"mask_fractions are shares of the patches to mask, each in [0, 1), e.g. [0.25, 0.5]; "
                f"got {self.mask_fractions}"
            )
        if not all(isinstance(f, (int, float)) and 0 < f <= 1 for f in self.crop_fractions):
            raise ConfigError(
                f"crop_fractions are centre-crop sides as a share of the image side, each in (0, 1], "
                f"e.g. [0.75]; got {self.crop_fractions}"
            )
        for name in ("mask_fractions", "crop_fractions"):
            if len(set(getattr(self, name))) != len(getattr(self, name)):
                raise ConfigError(f"{name} repeats a value: {getattr(self, name)}; list each once")
        if self.pretrain_images not in IMAGE_SETS:
            raise ConfigError(f"pretrain_images must be one of {IMAGE_SETS}, got {self.pretrain_images!r}")
        if self.distill_kind not in DISTILL_KINDS:
            raise ConfigError(f"distill_kind must be one of {DISTILL_KINDS}, got {self.distill_kind!r}")
        if self.image_size is not None and (
            isinstance(self.image_size, bool)
            or not isinstance(self.image_size, int)
            or not 1 <= self.image_size <= 8192
        ):
            raise ConfigError(f"image_size must be null or an integer in [1, 8192], got {self.image_size!r}")
        if self.seeds < 1 or self.epochs < 1:
            raise ConfigError(f"seeds and epochs must be >= 1, got seeds={self.seeds}, epochs={self.epochs}")
        cells = math.prod(len(v) for v in vars(self).values() if isinstance(v, (tuple, list)) and v)
        if self.seeds > MAX_RUNS or 2 * cells * self.seeds > MAX_RUNS:  # a ViT and a CNN per cell and seed
            raise ConfigError(
                f"this study plans up to {2 * cells * self.seeds:,} runs ({cells:,} cells x {self.seeds:,} seeds x 2 "
                f"models), above the limit of {MAX_RUNS:,}: use fewer --seeds or axis values, or split the study"
            )
        if self.recipe not in RECIPES:
            raise ConfigError(f"unknown recipe {self.recipe!r}: choose one of {list(RECIPES)}")
        if not 0 < self.param_tolerance < 1:
            raise ConfigError(f"param_tolerance is a fraction in (0, 1), e.g. 0.15; got {self.param_tolerance}")
        for kind, name in (("vit", self.vit), ("cnn", self.cnn)):
            get_config(name)  # raises, listing the registered names, if unknown
            if (kind == "vit") != hasattr(get_config(name), "patch_size"):
                raise ConfigError(
                    f"{kind}={name!r} is not a {kind.upper()}: choose a registered "
                    f"{'vit-*' if kind == 'vit' else 'cnn-*'} model (see `vitlab models`)"
                )

    @property
    def vit_name(self) -> str:
        """``vit`` as ``__post_init__`` resolved it (the dataset's default when given ``None``)."""
        return _resolved(self.vit, "vit")

    @property
    def cnn_name(self) -> str:
        """``cnn`` as ``__post_init__`` resolved it (the dataset's default when given ``None``)."""
        return _resolved(self.cnn, "cnn")

    @property
    def patch_sizes(self) -> list[int]:
        """``patches`` as ``__post_init__`` resolved it (the dataset's default when given ``None``)."""
        return _resolved(self.patches, "patches")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resolved(value: T | None, name: str) -> T:
    if value is None:
        raise ConfigError(
            f"CompareConfig.{name} is None after construction: set it to a value, or build a new "
            f"CompareConfig, which picks the dataset's default for a None"
        )
    return value


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
}


def grid_axes(config: CompareConfig) -> list[Axis]:
    """The study's axes, outermost first: seed, rows, augment, patch, then each variant axis the study
    varies, then the CNN met (so each seed's grid completes before the next seed starts, and runs
    sharing a training set are consecutive). A variant listing only its default is no axis: the
    registered ViT as is; likewise ``cnns=["matched"]``."""
    axes = [
        Axis("seed", "seed", tuple(range(config.seeds))),
        Axis("rows", "rows", tuple(config.rows)),
        Axis("augment", "augment", tuple(config.augment)),
        Axis("patch", "patch_size", tuple(config.patch_sizes), only="vit"),
    ]
    axes += [
        Axis(name, VARIANT_FIELDS[name], tuple(getattr(config, name)), only="vit")
        for name, default in VARIANTS.items()
        if getattr(config, name) != [default]
    ]
    return axes + ([Axis("cnn", "cnn", tuple(config.cnns), only="cnn")] if config.cnns != ["matched"] else [])


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


@dataclass
class RunPlan:
    """One training run: ``kind`` ("vit" or "cnn"), the registered ``model`` with ``overrides``,
    the shared axes' ``train`` fields, and the ``axes`` values it stands for (a CNN has no ViT-only
    axes, a ViT no CNN-only axis). ``params`` is its trainable parameter count for the data's shape;
    ``teacher`` the key of the CNN run it distils from (planned before it); ``mask_patches`` the patch
    grids its robustness is scored on (a ViT's own; a CNN's, those of the ViTs it meets)."""

    key: str
    kind: str
    model: str
    overrides: dict[str, Any]
    train: dict[str, Any]
    axes: dict[str, Any]
    params: int
    teacher: str | None = None
    mask_patches: list[int] = field(default_factory=list)


@dataclass
class Cell:
    """One grid point: its axis values and the keys of the ViT run and the CNN run it meets."""

    axes: dict[str, Any]
    vit: str
    cnn: str


@dataclass
class Plan:
    """The expanded grid: the axes, every cell, and the distinct runs they need (in run order);
    ``skipped``: each combination of the ViT's axes that cannot be built, ``{"axes", "reason"}`` (see
    :func:`skip_reason`), once for all its seeds, rows and settings."""

    axes: list[Axis]
    cells: list[Cell]
    runs: list[RunPlan]
    skipped: list[dict[str, Any]] = field(default_factory=list)


def data_shape(splits: DataSplits) -> dict[str, Any]:
    """The model fields the data fixes: ``num_classes``, ``in_chans``, ``img_size``."""
    chans, height, width = splits.image_shape
    return {"num_classes": splits.num_classes, "in_chans": chans, "img_size": (height, width)}


def model_params(name: str, **overrides: Any) -> int:
    """Trainable parameters of ``build_registered(name, **overrides)``."""
    return count_params(build_registered(name, **overrides))


def _run_key(kind: str, values: dict[str, Any], overrides: dict[str, Any]) -> str:
    settings = ",".join(f"{k}={'full' if k == 'rows' and v is None else v}" for k, v in values.items())
    extra = "" if kind == "vit" else ",widths=" + "-".join(map(str, overrides["widths"]))
    return f"{kind}:{settings}{extra}"


def plan_compare(config: CompareConfig, shape: dict[str, Any]) -> Plan:
    """Expand ``config`` into cells and runs for data of ``shape`` (see :func:`data_shape`).

    Raises ``ValueError`` when a patch size does not divide the image (without ``config.pad``), when
    the CNN family cannot get within ``param_tolerance`` of the ViT's parameter count, or when every
    combination is skipped (:func:`skip_reason`).
    """
    height, width = shape["img_size"]
    for patch in config.patch_sizes:
        if not config.pad and (height % patch or width % patch):
            raise ValueError(
                f"patch {patch} of --patches {','.join(map(str, config.patch_sizes))}: "
                f"{divisibility_error(height, width, patch)}; compare pads with --pad"
            )
    axes = grid_axes(config)
    cnn_base = get_config(config.cnn_name)
    matched: dict[str, tuple[int, dict[str, Any], int]] = {}  # ViT overrides -> (params, CNN overrides, params)

    def match(vit_overrides: dict[str, Any]) -> tuple[int, dict[str, Any], int]:
        key = repr(sorted(vit_overrides.items()))
        if key not in matched:
            vit_params = model_params(config.vit_name, **shape, **vit_overrides)
            budget = cnn_for_budget(
                vit_params,
                shape["img_size"],
                shape["in_chans"],
                shape["num_classes"],
                stages=len(cnn_base.widths),
                convs_per_stage=cnn_base.convs_per_stage,
                norm=cnn_base.norm,
                dropout=cnn_base.dropout,
            )
            cnn_overrides = {"widths": list(budget.widths)}
            cnn_params = model_params(config.cnn_name, **shape, **cnn_overrides)
            if abs(cnn_params - vit_params) > config.param_tolerance * vit_params:
                raise ValueError(
                    f"the closest {config.cnn_name} has {cnn_params:,} parameters against the ViT's "
                    f"{vit_params:,} at {vit_overrides}: more than ±{config.param_tolerance:.0%} "
                    f"apart; choose another --cnn family or ViT"
                )
            matched[key] = vit_params, cnn_overrides, cnn_params
        return matched[key]

    runs: dict[str, RunPlan] = {}
    cells: list[Cell] = []
    skipped: dict[str, dict[str, Any]] = {}
    for combo in product(*(axis.values for axis in axes)):
        values = {axis.name: value for axis, value in zip(axes, combo)}
        vit_values = {axis.name: value for axis, value in zip(axes, combo) if axis.only != "cnn"}
        reason, overrides = skip_reason(config, shape, values), {}
        if reason is None:
            try:  # any other combination the model refuses
                overrides = vit_overrides(config, shape, values)
                get_config(config.vit_name, **shape, **overrides)
            except ConfigError as err:
                reason = " ".join(str(err).split())
        if reason is not None:
            own = {axis.name: values[axis.name] for axis in axes if axis.only == "vit"}
            skipped.setdefault(repr(own), {"axes": own, "reason": reason})
            continue
        cnn_values = {axis.name: value for axis, value in zip(axes, combo) if axis.only != "vit"}
        train_fields = {axis.field: value for axis, value in zip(axes, combo) if axis.only is None}
        vit_train = {VIT_TRAINING[name]: values[name] for name in VIT_TRAINING if values.get(name) is not None}
        vit_params, cnn_overrides, cnn_params = match(overrides)
        fixed = CNN_CHOICES[values.get("cnn", "matched")]
        cnn_model = config.cnn_name
        if fixed is not None:
            cnn_model, cnn_overrides = fixed[0], dict(fixed[1])
            cnn_params = model_params(cnn_model, **shape, **cnn_overrides)
        cnn = RunPlan(
            _run_key("cnn", cnn_values, cnn_overrides),
            "cnn",
            cnn_model,
            cnn_overrides,
            train_fields,
            cnn_values,
            cnn_params,
        )
        distil = values.get("distill", VARIANTS["distill"]) == "cnn"
        vit = RunPlan(
            _run_key("vit", vit_values, overrides),
            "vit",
            config.vit_name,
            overrides,
            {**train_fields, **vit_train},
            vit_values,
            vit_params,
            teacher=cnn.key if distil else None,
        )
        for run in (cnn, vit) if distil else (vit, cnn):
            runs.setdefault(run.key, run)
        if values["patch"] not in (grids := runs[cnn.key].mask_patches):
            grids.append(values["patch"])
        runs[vit.key].mask_patches = [values["patch"]]
        cells.append(Cell(values, vit.key, cnn.key))
    if not cells:
        raise ConfigError(
            f"every combination of the study is skipped ({'; '.join(skipped_summary(list(skipped.values())))}): "
            f"change the values of --patches and the ViT variant axes"
        )
    return Plan(axes, cells, list(runs.values()), list(skipped.values()))


@dataclass
class RunRecord:
    """What one training run measured.

    ``gap`` = ``final_train_acc - best_val_acc``: the last epoch's training accuracy (on the
    augmented batches, in training mode) minus the best validation accuracy over the epochs.
    ``val_ece`` is the validation ECE at the best epoch; ``test_acc`` the test accuracy the training
    reports (``None`` without a test split). ``curves`` holds per-epoch ``train_acc``, ``val_acc``,
    ``train_loss``, ``val_loss``. ``train_rows`` is the number of training images actually used.
    ``robustness`` (with ``CompareConfig.robustness``): per patch grid, the accuracies of
    :func:`~vitlab.explain.robustness.robustness` on the test split (validation without one).
    """

    key: str
    kind: str
    model: str
    widths: list[int] | None
    axes: dict[str, Any]
    train_rows: int
    params: int
    best_val_acc: float
    best_epoch: int
    final_train_acc: float
    gap: float
    val_ece: float | None
    test_acc: float | None
    seconds: float
    curves: dict[str, list[float]]
    images_per_s: float | None = None
    peak_mb: float | None = None
    agreement: float | None = None
    tome_r: list[int] | None = None
    robustness: list[dict[str, Any]] | None = None
    diverged: bool = False
    train_eval_acc: float | None = None
    permutation: list[dict[str, Any]] | None = None

    @property
    def permuted_agreement(self) -> float | None:
        """With ``permute``: the share of held-out predictions that survive shuffled patches, as trained."""
        return None if self.permutation is None else self.permutation[0]["agreement"]

    @property
    def unpositioned_agreement(self) -> float | None:
        """With ``permute``: the same with the ViT's positions removed (as trained for a model without any)."""
        return None if self.permutation is None else self.permutation[-1]["agreement"]

    @property
    def label(self) -> str:
        """``ViT patch 2`` / ``ViT patch 2, window attention`` / ``CNN 39-77-154`` / ``CNN 32-64-64
        (textbook-size plain)``: the model as the tables and plots name it."""
        if self.kind == "vit":
            variants = [variant_words(name, self.axes[name]) for name in VARIANTS if name in self.axes]
            return ", ".join([f"ViT patch {self.axes['patch']}", *variants])
        if self.widths is None:
            raise ValueError(f"CNN run {self.key!r} has no widths: a CNN record always carries its stage widths")
        which = f" ({CNN_WORDS[self.axes['cnn']]})" if "cnn" in self.axes else ""
        return "CNN " + "-".join(map(str, self.widths)) + which

    @property
    def final_val_acc(self) -> float:
        """Validation accuracy at the last epoch (a ``tome`` run's: that of its merged model)."""
        if self.tome_r is not None or self.diverged:
            return self.best_val_acc
        return self.curves["val_acc"][-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "label": self.label,
            "final_val_acc": self.final_val_acc,
            "permuted_agreement": self.permuted_agreement,
            "unpositioned_agreement": self.unpositioned_agreement,
        }


@dataclass
class CompareResult:
    """What :func:`run_compare` returns: the config, the plan, every run's record (by run key),
    the data's description, the study's wall time and the CPU time of its runs and of this process
    outside them; ``execution`` describes the executor; ``files`` lists what was written;
    ``attention`` names the best ViT run and its per-head attention figures (when files are written)."""

    config: CompareConfig
    plan: Plan
    records: dict[str, RunRecord]
    data: dict[str, Any]
    seconds: float
    cpu_seconds: float
    execution: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)


# progress(done, total, run, record): called as each run's record arrives; done counts from 1.
ProgressFn = Callable[[int, int, RunPlan, RunRecord], None]


def load_splits(config: CompareConfig, seed: int, rows: int | None) -> DataSplits:
    """The study's data for ``seed`` and ``rows`` (``normalization="unit"``: mean 0 and std 1, so the
    models see the pixels as loaded, in [0, 1]). Image files are read at ``image_size`` (default 32) into
    memory; a tensor dataset is resized to it when it is set."""
    common: dict[str, Any] = {"seed": seed, "rows": rows, "normalization": config.normalization}
    if config.dataset in PHOTO_SOURCES:
        side = config.image_size or 32
        preprocess = Preprocess(image_size=(side, side))
        return load_dataset(config.dataset, config.data_dir, preprocess=preprocess, loader="memory", **common)
    splits = load_dataset(config.dataset, config.data_dir, **common)
    return splits if config.image_size is None else resize_splits(splits, config.image_size)


def record_run(
    run: RunPlan,
    result: TrainResult,
    splits: DataSplits,
    seconds: float | None = None,
    probes: Probes | None = None,
    *,
    train_eval: bool = False,
    permute: bool = False,
) -> RunRecord:
    """A :class:`RunRecord` from a plan and its :class:`~vitlab.tasks.TrainResult` on ``splits``
    (``seconds`` replaces the training's own wall time, e.g. to add pretraining); a ``tome`` run
    evaluates ``result.model`` with merging (see :class:`RunRecord`). With ``probes``, the model is
    also scored with patches masked and cropped on the test split (validation without one)."""
    history = result.history
    best = next(r for r in history if r["epoch"] == result.best_epoch)
    curves = {k: [r[k] for r in history] for k in ("train_acc", "val_acc", "train_loss", "val_loss")}
    fields: dict[str, Any] = dict(
        best_val_acc=result.best_val_acc,
        best_epoch=result.best_epoch,
        val_ece=best["val_ece"],
        test_acc=result.test["acc"] if result.test is not None else None,
    )
    scored: nn.Module = result.model
    if run.axes.get("attention") == "tome":
        model = result.model
        merged = scored = with_tome(cast(VisionTransformer, model), splits.image_shape[1:])
        device = next(model.parameters()).device

        def logits(net: nn.Module, data: ImageDataset) -> torch.Tensor:
            return predict_logits(net, data.images.to(device), splits.mean, splits.std).cpu()

        held = splits.in_memory("val", "token merging")
        val = classification_report(merged_val := logits(merged, held), held.labels, held.classes)
        tested = None if splits.test is None else splits.in_memory("test", "token merging")
        test = None if tested is None else classification_report(logits(merged, tested), tested.labels, tested.classes)
        agreement = (merged_val.argmax(-1) == logits(model, held).argmax(-1)).float().mean().item()
        fields = dict(
            best_val_acc=val["accuracy"],
            best_epoch=history[-1]["epoch"],
            val_ece=val["ece"],
            test_acc=None if test is None else test["accuracy"],
            agreement=agreement,
            tome_r=list(merged.r),
        )
    if probes is not None:
        held_out = splits.in_memory("test" if splits.test is not None else "val", "--robustness")
        fields["robustness"] = robustness(scored, held_out, splits.mean, splits.std, run.mask_patches, probes)
    if train_eval:
        fields["train_eval_acc"] = eval_mode_train_accuracy(scored, splits)
    if permute:
        fields["permutation"] = permuted_rows(scored, splits, run)
    return RunRecord(
        key=run.key,
        kind=run.kind,
        model=run.model,
        widths=list(run.overrides["widths"]) if run.kind == "cnn" else None,
        axes=run.axes,
        train_rows=len(splits.train),
        params=result.params,
        final_train_acc=result.train_acc,
        gap=result.train_acc - fields["best_val_acc"],
        seconds=result.seconds if seconds is None else seconds,
        curves=curves,
        **fields,
    )


# Held-out images the permutation probe shuffles.
PERMUTE_IMAGES = 1_000


def eval_mode_train_accuracy(model: nn.Module, splits: DataSplits) -> float:
    """The chosen weights' accuracy on (up to :data:`TRAIN_EVAL_ROWS` of) the training rows as loaded: eval
    mode, no augmentation, after training -- the other reading of "train accuracy" beside the running mean
    over the last epoch's augmented batches in training mode, which Keras's ``fit`` and vitlab report."""
    train = splits.in_memory("train", "the eval-mode training accuracy")
    images, labels = train.images[:TRAIN_EVAL_ROWS], train.labels[:TRAIN_EVAL_ROWS]
    device = next(model.parameters()).device
    logits = predict_logits(model, images.to(device), splits.mean, splits.std).cpu()
    return float((logits.argmax(-1) == labels).float().mean())


def permuted_rows(model: nn.Module, splits: DataSplits, run: RunPlan) -> list[dict[str, Any]]:
    """:func:`~vitlab.explain.probes.permutation_probe` rows for ``model`` on up to :data:`PERMUTE_IMAGES`
    held-out images (test, else validation), patches of the ViT's own size (a CNN's: the patch of the ViTs it
    meets, the first)."""
    held_out = splits.in_memory("test" if splits.test is not None else "val", "the permutation probe")
    device = next(model.parameters()).device
    images = normalize(held_out.images[:PERMUTE_IMAGES].to(device), splits.mean, splits.std)
    labels = held_out.labels[:PERMUTE_IMAGES].to(device)
    return permutation_probe(model.eval(), images, labels, run.mask_patches[0])["rows"]


def diverged_record(run: RunPlan, splits: DataSplits, seconds: float) -> RunRecord:
    """The record of a run whose loss stopped being finite: ``diverged``, its accuracies (validation,
    test, train) those of a constant guess of the validation split's most frequent class, no ECE, no
    curves, and the seconds it ran."""
    val = splits.in_memory("val", "a diverged run's record")
    guess = int(torch.bincount(val.labels).argmax())

    def share(data: ImageDataset | None) -> float | None:
        return None if data is None else float((data.labels == guess).float().mean())

    train = share(splits.in_memory("train", "a diverged run's record"))
    test = share(splits.in_memory("test", "a diverged run's record")) if splits.test is not None else None
    best = cast(float, share(val))
    return RunRecord(
        key=run.key,
        kind=run.kind,
        model=run.model,
        widths=list(run.overrides["widths"]) if run.kind == "cnn" else None,
        axes=run.axes,
        train_rows=len(splits.train),
        params=run.params,
        best_val_acc=best,
        best_epoch=0,
        final_train_acc=cast(float, train),
        gap=cast(float, train) - best,
        val_ece=None,
        test_acc=test,
        seconds=seconds,
        curves={k: [] for k in ("train_acc", "val_acc", "train_loss", "val_loss")},
        diverged=True,
    )


def build_architecture(run: RunPlan, shape: dict[str, Any]) -> nn.Module:
    """A freshly initialised model of ``run``'s architecture for data of ``shape``: its model and
    overrides, with a distillation token when it has a teacher, merging tokens for ``tome``."""
    model = build_registered(run.model, **shape, **run.overrides, **({"distill_token": True} if run.teacher else {}))
    if run.axes.get("attention") != "tome":
        return model
    return with_tome(cast(VisionTransformer, model), shape["img_size"])  # tome runs are ViTs (see plan_compare)


def _architecture(run: RunPlan) -> str:
    distilled, tome = run.teacher is not None, run.axes.get("attention") == "tome"
    return repr((run.model, sorted(run.overrides.items()), distilled, tome))


def measure_forward(plan: Plan, records: dict[str, RunRecord], shape: dict[str, Any], images: torch.Tensor) -> None:
    """Fill every record's ``images_per_s`` and ``peak_mb``: the forward cost of its architecture
    (model and overrides, distillation token, token merging) on ``images (B, C, H, W)`` (normalised,
    on the device to measure on). Weights do not change the cost, so each distinct architecture is
    built fresh once, and all are timed together in alternating rounds
    (:func:`~vitlab.engine.measure.forward_costs`): load that changes during a long study cannot
    favour one run over another."""
    models: dict[str, nn.Module] = {}
    for run in plan.runs:
        if (key := _architecture(run)) not in models:
            models[key] = build_architecture(run, shape).to(images.device)
    costs = forward_costs(models, images)
    for run in plan.runs:
        cost = costs[_architecture(run)]
        records[run.key].images_per_s, records[run.key].peak_mb = cost["images_per_s"], cost["peak_mb"]


def train_config(config: CompareConfig, run: RunPlan) -> TrainConfig:
    """The :class:`~vitlab.engine.TrainConfig` of one run: the study's recipe, epochs, data and
    device, the run's model and overrides, and its shared axes' fields (``augment="recipe"`` keeps
    the recipe's augmentation). Pretraining and the teacher are added by :func:`run_task`."""
    given = {k: v for k, v in run.train.items() if not (k == "augment" and v == RECIPE_AUGMENT)}
    return TrainConfig.from_recipe(
        config.recipe,
        model=run.model,
        model_overrides=run.overrides,
        dataset=config.dataset,
        data_dir=config.data_dir,
        epochs=config.epochs,
        device=config.device,
        **given,
    )


def _figure_candidate(run: RunPlan) -> bool:
    """Whether ``run`` may be the ViT whose attention the report draws: a :class:`VisionTransformer` with
    full or LSA attention over tiling patches (not Swin's windows, not overlapping windows)."""
    return (
        run.kind == "vit"
        and isinstance(get_config(run.model), ViTConfig)
        and run.axes.get("attention", "full") in ("full", "lsa")
        and run.overrides.get("patch_stride") in (None, run.overrides.get("patch_size"))
    )


def _encoder_key(run: RunPlan) -> str:
    return repr((run.train["seed"], run.axes["pretrain"], sorted(run.overrides.items())))


def run_groups(config: CompareConfig, plan: Plan) -> list[list[RunPlan]]:
    """The plan's runs in groups that must run together, each in plan order, the groups in the
    order of their first run: a distilled ViT with its teacher CNN, ViTs fine-tuned from one
    pretrained encoder (per seed, method and ViT shape), and runs of one training configuration (a
    ``tome`` ViT and the full-attention ViT whose training it evaluates). Every other run is a group
    of its own."""
    parent = {run.key: run.key for run in plan.runs}

    def root(key: str) -> str:
        while parent[key] != key:
            key = parent[key]
        return key

    first: dict[str, str] = {}  # a shared thing -> the first run that needs it
    for run in plan.runs:
        shared = [repr(("training", train_config(config, run), run.teacher, run.axes.get("pretrain")))]
        if run.axes.get("pretrain", "none") != "none":
            shared.append(_encoder_key(run))
        others = [first.setdefault(thing, run.key) for thing in shared] + ([run.teacher] if run.teacher else [])
        for other in others:
            parent[root(run.key)] = root(other)
    groups: dict[str, list[RunPlan]] = {}
    for run in plan.runs:
        groups.setdefault(root(run.key), []).append(run)
    return list(groups.values())


@dataclass
class Task:
    """What one worker trains: the study's config and a group of runs (see :func:`run_groups`)."""

    config: CompareConfig
    runs: list[RunPlan]


@dataclass
class RunOutcome:
    """A run's record and, for a ViT that may be the study's best (:func:`_figure_candidate`), its
    trained weights (``torch.save`` of the state dict, CPU tensors) for the report's attention figures."""

    record: RunRecord
    weights: bytes | None = None


@dataclass
class TaskResult:
    """Each run's outcome by key, and the CPU seconds the worker process spent on the task."""

    outcomes: dict[str, RunOutcome]
    cpu_seconds: float


def _state_bytes(model: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buffer)
    return buffer.getvalue()


def run_task(task: Task) -> TaskResult:
    """Train a task's runs in order (in whichever process or machine calls it): teachers are saved
    to and read from a temporary folder, pretrained encoders are made once per seed, method and ViT
    shape, and a run whose training configuration was already trained reuses that training. Every
    training seeds itself from its run's own fields."""
    cpu_start, config = time.process_time(), task.config
    cache: dict[tuple[int, int | None], DataSplits] = {}

    def splits_for(seed: int, rows: int | None) -> DataSplits:
        if (seed, rows) not in cache:
            cache.clear()  # runs come grouped by (seed, rows)
            cache[seed, rows] = load_splits(config, seed, rows)
        return cache[seed, rows]

    teachers = sorted({run.teacher for run in task.runs if run.teacher is not None})
    probes = Probes(tuple(config.mask_fractions), tuple(config.crop_fractions)) if config.robustness else None
    outcomes: dict[str, RunOutcome] = {}
    trained: dict[str, TrainResult] = {}
    diverged: dict[str, float] = {}  # training config -> seconds until its loss stopped being finite
    with tempfile.TemporaryDirectory(prefix="vitlab-compare-") as tmp:
        encoders: dict[str, tuple[str, float]] = {}  # by encoder key: checkpoint folder, seconds

        def encoder(run: RunPlan) -> tuple[str, float]:
            if (key := _encoder_key(run)) not in encoders:
                began, out = time.perf_counter(), str(Path(tmp) / f"pretrain-{len(encoders)}")
                pretrain_run(
                    method=run.axes["pretrain"],
                    model=run.model,
                    model_overrides=run.overrides,
                    dataset=config.dataset,
                    data_dir=config.data_dir,
                    images=config.pretrain_images,
                    seed=run.train["seed"],
                    epochs=config.pretrain_epochs,
                    device=config.device,
                    out_dir=out,
                )
                encoders[key] = out, time.perf_counter() - began
            return encoders[key]

        for run in task.runs:
            splits = splits_for(run.train["seed"], run.train["rows"])
            cfg, pretrain_seconds = train_config(config, run), 0.0
            if run.axes.get("pretrain", "none") != "none":
                init, pretrain_seconds = encoder(run)
                cfg = replace(cfg, init=init, layer_decay=config.layer_decay)
            if run.teacher is not None:
                cfg = replace(
                    cfg,
                    teacher=str(Path(tmp) / f"teacher-{teachers.index(run.teacher)}"),
                    distill=config.distill_kind,
                    distill_temperature=config.distill_temperature,
                    distill_alpha=config.distill_alpha,
                )
            if run.key in teachers:
                cfg = replace(cfg, out_dir=str(Path(tmp) / f"teacher-{teachers.index(run.key)}"))
            if repr(cfg) in diverged:
                outcomes[run.key] = RunOutcome(diverged_record(run, splits, diverged[repr(cfg)]))
                continue
            began = time.perf_counter()
            try:
                result = trained.get(repr(cfg)) or train_run(cfg, splits)
            except DivergenceError:
                diverged[repr(cfg)] = time.perf_counter() - began + pretrain_seconds
                outcomes[run.key] = RunOutcome(diverged_record(run, splits, diverged[repr(cfg)]))
                continue
            trained[repr(cfg)] = result
            record = record_run(
                run,
                result,
                splits,
                result.seconds + pretrain_seconds,
                probes,
                train_eval=config.train_eval,
                permute=config.permute,
            )
            outcomes[run.key] = RunOutcome(record, _state_bytes(result.model) if _figure_candidate(run) else None)
    return TaskResult(outcomes, time.process_time() - cpu_start)


def execute(
    config: CompareConfig, plan: Plan, executor: Executor, progress: ProgressFn | None = None
) -> tuple[dict[str, RunOutcome], float]:
    """Run the plan's groups (:func:`run_groups`) as tasks on ``executor`` (see :func:`execute_many`);
    return every run's outcome in plan order and the CPU seconds the tasks took."""
    (outcomes,), cpu_seconds = execute_many([(config, plan)], executor, progress)
    return outcomes, cpu_seconds


def execute_many(
    studies: Sequence[tuple[CompareConfig, Plan]], executor: Executor, progress: ProgressFn | None = None
) -> tuple[list[dict[str, RunOutcome]], float]:
    """Run several studies' groups (:func:`run_groups`, each with its own config) as one list of tasks on
    ``executor``, the most training (rows times epochs; the whole pool counting as most) first so that no
    worker idles while a long run finishes last; return each study's outcomes in plan order and the CPU
    seconds the tasks took. ``progress`` hears of each run as its task finishes, counted over all studies."""
    tagged = [
        (index, Task(config, runs)) for index, (config, plan) in enumerate(studies) for runs in run_groups(config, plan)
    ]
    tagged.sort(
        reverse=True,
        key=lambda item: (
            item[1].config.epochs
            * sum(math.inf if run.train["rows"] is None else run.train["rows"] for run in item[1].runs)
        ),
    )
    by_key = [{run.key: run for run in plan.runs} for _, plan in studies]
    total = sum(len(plan.runs) for _, plan in studies)
    found: list[dict[str, RunOutcome]] = [{} for _ in studies]
    cpu_seconds, done = 0.0, 0
    for position, result in executor.map(run_task, [task for _, task in tagged]):
        study = tagged[position][0]
        cpu_seconds += result.cpu_seconds
        for key, outcome in result.outcomes.items():
            found[study][key] = outcome
            done += 1
            if progress is not None:
                progress(done, total, by_key[study][key], outcome.record)
    return [{run.key: found[i][run.key] for run in plan.runs} for i, (_, plan) in enumerate(studies)], cpu_seconds


def study_device(device: str) -> torch.device:
    """The device ``auto`` / ``cpu`` / ``cuda[:i]`` stands for in this process."""
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)


def attention_figures(
    config: CompareConfig, plan: Plan, outcomes: dict[str, RunOutcome], shape: dict[str, Any], device: torch.device
) -> dict[str, Any]:
    """Per-head attention figures of the ViT with the best validation accuracy among the candidates
    (the first in plan order on a tie), written under ``config.out_dir / "attention"``; ``{}``
    without a candidate."""
    best, weights = None, b""
    for run in plan.runs:
        outcome = outcomes[run.key]
        if outcome.weights is not None and (
            best is None or outcome.record.best_val_acc > outcomes[best.key].record.best_val_acc
        ):
            best, weights = run, outcome.weights
    if config.out_dir is None:
        return {}
    if best is None:
        return {
            "reason": "no ViT of the study attends over the whole grid of tiling patches (windows, overlapping "
            "windows or a cheaper attention), so there are no per-head attention figures"
        }
    model = build_architecture(best, shape)
    model.load_state_dict(torch.load(io.BytesIO(weights), weights_only=True))
    splits = load_splits(config, best.train["seed"], best.train["rows"])
    files = []
    with tempfile.TemporaryDirectory(prefix="vitlab-attention-") as tmp:
        for made in attention_examples(model.to(device).eval(), splits, n_correct=2, n_wrong=2, out_dir=tmp):
            files.append(f"attention/{Path(made).name}")
            write_file(Path(config.out_dir) / files[-1], Path(made).read_bytes())
    return {"run": best.key, "label": outcomes[best.key].record.label, "files": files}


def run_compare(
    config: CompareConfig, progress: ProgressFn | None = None, executor: Executor | None = None, overwrite: bool = False
) -> CompareResult:
    """Train every run of the grid on ``executor`` (default: one after the other in this process)
    and, if ``config.out_dir`` is set, write the report there (a run folder of kind ``compare``: an
    existing study is refused unless ``overwrite``). Bad settings, rows beyond the pool and an output
    folder that cannot be used fail before any training."""
    if config.out_dir is None:
        return _run_compare(config, progress, executor)
    settings = {k: v for k, v in asdict(config).items() if k != "out_dir"}  # `--config` runs it again
    with open_study(config.out_dir, settings, overwrite):
        return _run_compare(config, progress, executor)


def _run_compare(config: CompareConfig, progress: ProgressFn | None, executor: Executor | None) -> CompareResult:
    start, cpu_start = time.perf_counter(), time.process_time()
    full = load_splits(config, 0, None)
    pool = len(full.train)
    too_many = [r for r in config.rows if r is not None and r > pool]
    if too_many:
        raise ConfigError(
            f"rows {too_many} exceed the {config.dataset} training pool of {pool:,} images: "
            f"choose rows <= {pool:,} or 'full'"
        )
    shape = data_shape(full)
    plan = plan_compare(config, shape)
    data = {
        "dataset": full.name,
        "image_shape": list(full.image_shape),
        "num_classes": full.num_classes,
        "pool": pool,
        "val": len(full.val),
        "test": len(full.test) if full.test is not None else None,
        "normalization": config.normalization,
    }
    executor = executor or LocalExecutor(jobs=1, threads=None)
    cpu_before = time.process_time()
    outcomes, task_cpu = execute(config, plan, executor, progress)
    cpu_between = time.process_time()
    records = {key: outcome.record for key, outcome in outcomes.items()}
    device = study_device(config.device)
    sample = full.in_memory("val", "the forward-speed measurement").images[:256]
    measure_forward(plan, records, shape, normalize(sample.to(device), full.mean, full.std))
    result = CompareResult(config, plan, records, data, 0.0, 0.0, execution=executor.describe())
    if config.out_dir is not None:
        result.attention = attention_figures(config, plan, outcomes, shape, device)
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = task_cpu + (cpu_before - cpu_start) + (time.process_time() - cpu_between)
    if config.out_dir is not None:
        result.files = write_report(result, config.out_dir)
    return result
