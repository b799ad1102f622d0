"""One ViT-versus-CNN study as a config: :class:`CompareConfig`, every field checked when it is made,
the per-dataset default models and the named studies (:data:`STUDY_PRESETS`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from ..data import NORMALIZATIONS
from ..data.augment import PRESETS
from ..data.paths import absolute_data_dir
from ..errors import ConfigError
from ..explain.robustness import Probes
from ..models import get_config
from ..models.tuning import parse_mode
from .axes import CNN_CHOICES, RECIPE_AUGMENT, VARIANT_CHOICES, VARIANTS, VIT_TRAINING
from .textbook import PRESET
from .training import DISTILL_KINDS, IMAGE_SETS, RECIPES, TrainConfig

T = TypeVar("T")


# Per-dataset defaults: (ViT, CNN family, patch sizes). 28x28 data gets the textbook's model.
DEFAULT_MODELS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "digits": ("vit-digits", "cnn-digits", (2, 4)),
}

FALLBACK_MODELS = ("vit-seed", "cnn-seed", (7,))

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
    ViT's learning rates and warmup epochs (``None``: the recipe's). ``tune``: the ViT's training modes
    (:data:`~vitlab.models.tuning.TUNE_MODES`), each on a pretrained encoder: ``init`` (a checkpoint every ViT
    starts from, fine-tuned with ``layer_decay``) or the ``pretrain`` axis. ``permute``: score every trained model
    with its patches shuffled (:func:`~vitlab.explain.input_probes.permutation_probe` on up to
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
    tune: list[str] = field(default_factory=lambda: [VARIANTS["tune"]])
    init: str | None = None
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
        self._fill_defaults()
        self._check_values()
        self._check_settings()
        self._check_size_and_models()
        self.data_dir = absolute_data_dir(self.data_dir)  # each run records the folder it read, absolute

    def _fill_defaults(self) -> None:
        """The dataset's default models and patch sizes for a ``None``; every list field copied to a list
        (checked: no axis list empty or repeating a value, rows and patches positive, known augmentations)."""
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

    def _check_values(self) -> None:
        """Every axis value among its choices; strides and the ViT's training settings in range."""
        for name, choices in (*VARIANT_CHOICES.items(), ("cnns", tuple(CNN_CHOICES))):
            unknown = [v for v in getattr(self, name) if v not in choices]
            if unknown:
                raise ConfigError(f"unknown {name} value(s) {unknown}: choose from {choices}")
        self.stride = [str(v) for v in self.stride]
        if any(v != "patch" and not (v.isdigit() and int(v) > 0) for v in self.stride):
            raise ConfigError(f"stride values are 'patch' or a number of pixels, e.g. patch,4; got {self.stride}")
        for mode in self.tune:
            parse_mode(mode)
        if set(self.tune) - {"full"} and self.init is None and set(self.pretrain) == {"none"}:
            raise ConfigError(
                f"--tune {','.join(self.tune)} freezes (part of) an encoder that nothing pretrained: give "
                f"--init CKPT (an encoder trained elsewhere) or --pretrain mae|dino"
            )
        for name, field_name in VIT_TRAINING.items():
            values = getattr(self, name)
            if any(v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))) for v in values):
                raise ConfigError(f"{name} values are numbers (or null: the recipe's), got {values}")
            for value in values:  # each within the training config's own range
                if value is not None:
                    TrainConfig.from_recipe(self.recipe, **{field_name: value})

    def _check_settings(self) -> None:
        """Normalization, preset, the pretraining, probing and distillation settings."""
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

    def _check_size_and_models(self) -> None:
        """The image size, seeds and epochs, the number of runs, the recipe and the two models."""
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
        for kind, name in (("vit", self.vit_name), ("cnn", self.cnn_name)):
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
