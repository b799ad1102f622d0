"""ViT against a CNN of the same size: ``run_compare(CompareConfig) -> CompareResult``.

The textbook's mini-project as one grid. Each **cell** is one combination of axis values (seed,
training rows, augmentation preset, ViT patch size, ...); in it a ViT and a CNN train with the same
data, seed, recipe (optimiser, schedule, epochs) and augmentation. The CNN is sized by
:func:`~vitlab.models.cnn_for_budget` to the parameter count of the ViT *at that patch size* and must
land within ``param_tolerance`` of it (±15% by default).

The grid is a list of :class:`Axis`. An axis either sets a :class:`~vitlab.train.TrainConfig` field
for both models (rows, augment, seed) or applies to the ViT only: its patch size, and the variant axes
of :data:`VARIANTS`, each in the grid only when the study lists something besides its default:

- ``attention``: ``full`` (the registered model), a cheaper kind from :mod:`vitlab.layers.attention`
  (``window``, ``linear``, ``lowrank``, ``latent``, ``lsa``; sized to the patch grid by
  :func:`attention_overrides`), or ``tome``: the full-attention model, trained once, evaluated with
  token merging (:func:`tome_schedule`) -- no retraining, so accuracy, speed and memory say what
  merging costs and saves.
- ``pretrain``: ``none`` (from scratch), ``mae`` or ``dino``: the ViT is pretrained without labels
  (:func:`vitlab.ssl.pretrain`, once per seed and ViT shape) and fine-tuned from it with layer-wise
  learning-rate decay on the cell's labelled rows.
- ``distill``: ``none`` or ``cnn``: the ViT gets a DeiT distillation token and learns from the cell's
  own size-matched CNN (trained first, same rows and seed) as its teacher.

A run is identified by what it trains, so when two patch sizes give the ViT the same parameter count
(as patches 2 and 4 do for ``vit-digits``) the matched CNN is trained once per (seed, rows, augment)
and paired with both. Every run's record also holds its forward cost on a validation batch
(images per second, peak memory).

Nothing is written unless ``out_dir`` is set; then :func:`~vitlab.experiments.report.write_report`
writes ``results.json``, ``report.md`` and the figures there.
"""
from __future__ import annotations

import math
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from itertools import product
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from ..data import DataSplits, ImageDataset, load_dataset
from ..data.augment import normalize
from ..data.augment import PRESETS
from ..models import TokenMergingViT, ViTConfig, VisionTransformer, apply_tome, cnn_for_budget, count_params, create_model, front_loaded, get_config
from ..ops.patches import divisibility_error
from ..explain import attention_examples
from ..ssl.pretrain import IMAGE_SETS, METHODS, PretrainConfig, pretrain
from ..ssl.distill import DISTILL_KINDS, distilled_from
from ..train import RECIPES, TrainConfig, TrainResult, train
from ..train.evaluate import classification_report, predict_logits
from ..train.measure import forward_costs
from .figures import RECIPE_AUGMENT, VARIANTS, variant_words
from .report import write_report

# Per-dataset defaults: (ViT, CNN family, patch sizes). 28x28 data gets the textbook's model.
DEFAULT_MODELS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "digits": ("vit-digits", "cnn-digits", (2, 4)),
}
FALLBACK_MODELS = ("vit-seed", "cnn-seed", (7,))
# The values each variant axis (see VARIANTS, with their defaults) may take.
VARIANT_CHOICES: dict[str, tuple[str, ...]] = {
    "attention": ("full", "window", "linear", "lowrank", "latent", "lsa", "tome"),
    "pretrain": ("none", *METHODS),
    "distill": ("none", "cnn"),
}


@dataclass
class CompareConfig:
    """One ViT-versus-CNN study.

    ``rows``: training-set sizes (``None`` = the whole training pool). ``patches``: ViT patch sizes
    (each must divide the image side). ``augment``: augmentation presets, or ``"recipe"`` for the
    recipe's own augmentation (the report says what it is). ``seeds``: repetitions of
    every cell, seeds ``0 .. seeds-1`` (both models of a cell share the seed, hence the data split
    and the order of batches). ``recipe``: the :data:`~vitlab.train.RECIPES` entry both models train
    with, for ``epochs`` epochs. ``vit`` / ``cnn``: registered model names; ``None`` picks them per
    dataset (``vit-digits`` / ``cnn-digits`` for digits, ``vit-seed`` / ``cnn-seed`` otherwise), and
    ``patches=None`` likewise ((2, 4) for digits, (7,) otherwise). The CNN keeps its family's depth
    and block settings and gets the widths that match the ViT's parameter count.
    ``attention`` / ``pretrain`` / ``distill``: the ViT variants to study (see the module doc);
    ``pretrain_epochs``, ``pretrain_images`` (``all`` images of the dataset, labels unused, or the
    ``train`` pool only) and ``layer_decay`` set the pretraining and fine-tuning; ``distill_kind``
    (``soft`` / ``hard``), ``distill_temperature`` and ``distill_alpha`` the distillation.
    ``out_dir``: where the report goes (the CLI uses ``runs/<name>``); ``None`` writes nothing.
    ``device``: as :class:`~vitlab.train.TrainConfig` (``auto`` = CUDA when present).
    """
    name: str = "compare"
    dataset: str = "digits"
    data_dir: str | None = None
    rows: list[int | None] = field(default_factory=lambda: [300, None])
    patches: list[int] | None = None
    augment: list[str] = field(default_factory=lambda: ["none", RECIPE_AUGMENT])
    seeds: int = 1
    epochs: int = 40
    recipe: str = "default"
    vit: str | None = None
    cnn: str | None = None
    param_tolerance: float = 0.15
    attention: list[str] = field(default_factory=lambda: [VARIANTS["attention"]])
    pretrain: list[str] = field(default_factory=lambda: [VARIANTS["pretrain"]])
    distill: list[str] = field(default_factory=lambda: [VARIANTS["distill"]])
    pretrain_epochs: int = 40
    pretrain_images: str = "all"
    layer_decay: float = 0.75
    distill_kind: str = "soft"
    distill_temperature: float = 4.0
    distill_alpha: float = 0.5
    out_dir: str | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        vit, cnn, patches = DEFAULT_MODELS.get(self.dataset, FALLBACK_MODELS)
        self.vit = self.vit or vit
        self.cnn = self.cnn or cnn
        self.patches = list(self.patches) if self.patches is not None else list(patches)
        self.rows, self.augment = list(self.rows), list(self.augment)
        for name in VARIANTS:
            setattr(self, name, list(getattr(self, name)))
        for name in ("rows", "patches", "augment", *VARIANTS):
            values = getattr(self, name)
            if not values:
                raise ValueError(f"{name} is empty: give at least one value")
            if len(set(values)) != len(values):
                raise ValueError(f"{name} repeats a value: {values}; list each once")
        if any(r is not None and (int(r) != r or r < 1) for r in self.rows):
            raise ValueError(f"rows must be positive image counts or None (the full pool), got {self.rows}")
        if any(int(p) != p or p < 1 for p in self.patches):
            raise ValueError(f"patches must be positive integers, got {self.patches}")
        unknown = [a for a in self.augment if a not in (*PRESETS, RECIPE_AUGMENT)]
        if unknown:
            raise ValueError(f"unknown augment preset(s) {unknown}: choose from {PRESETS} or "
                             f"{RECIPE_AUGMENT!r} (the recipe's own augmentation)")
        for name, choices in VARIANT_CHOICES.items():
            unknown = [v for v in getattr(self, name) if v not in choices]
            if unknown:
                raise ValueError(f"unknown {name} value(s) {unknown}: choose from {choices}")
        grid_bound = sorted({"window", "lowrank"} & set(self.attention))
        if grid_bound and set(self.pretrain) - {"none"}:
            raise ValueError(f"--pretrain {','.join(self.pretrain)} feeds the encoder visible tokens only (MAE) or "
                             f"crops of other sizes (DINO), which {' and '.join(grid_bound)} attention, built for the "
                             f"whole patch grid, cannot take: study them without pretraining (--pretrain none)")
        if self.pretrain_images not in IMAGE_SETS:
            raise ValueError(f"pretrain_images must be one of {IMAGE_SETS}, got {self.pretrain_images!r}")
        if self.distill_kind not in DISTILL_KINDS:
            raise ValueError(f"distill_kind must be one of {DISTILL_KINDS}, got {self.distill_kind!r}")
        if self.seeds < 1 or self.epochs < 1:
            raise ValueError(f"seeds and epochs must be >= 1, got seeds={self.seeds}, epochs={self.epochs}")
        if self.recipe not in RECIPES:
            raise ValueError(f"unknown recipe {self.recipe!r}: choose one of {list(RECIPES)}")
        if not 0 < self.param_tolerance < 1:
            raise ValueError(f"param_tolerance is a fraction in (0, 1), e.g. 0.15; got {self.param_tolerance}")
        for kind, name in (("vit", self.vit), ("cnn", self.cnn)):
            get_config(name)                     # raises, listing the registered names, if unknown
            if (kind == "vit") != hasattr(get_config(name), "patch_size"):
                raise ValueError(f"{kind}={name!r} is not a {kind.upper()}: choose a registered "
                                 f"{'vit-*' if kind == 'vit' else 'cnn-*'} model (see `vitlab models`)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Axis:
    """One dimension of the grid: ``name`` labels it in results and tables; ``field`` is the
    :class:`~vitlab.train.TrainConfig` field it sets for both models, or, with ``vit_only``, what it
    sets for the ViT alone (a config field such as ``patch_size``, or a training setting such as
    ``init``); the CNN is then matched to the ViT at each value."""
    name: str
    field: str
    values: tuple[Any, ...]
    vit_only: bool = False


VARIANT_FIELDS = {"attention": "attention", "pretrain": "init", "distill": "teacher"}


def grid_axes(config: CompareConfig) -> list[Axis]:
    """The study's axes, outermost first: seed, rows, augment, patch, then each variant axis the study
    varies (so each seed's grid completes before the next seed starts, and runs sharing a training
    set are consecutive). A variant listing only its default is no axis: the registered ViT as is."""
    axes = [Axis("seed", "seed", tuple(range(config.seeds))),
            Axis("rows", "rows", tuple(config.rows)),
            Axis("augment", "augment", tuple(config.augment)),
            Axis("patch", "patch_size", tuple(config.patches), vit_only=True)]
    return axes + [Axis(name, VARIANT_FIELDS[name], tuple(getattr(config, name)), vit_only=True)
                   for name, default in VARIANTS.items() if getattr(config, name) != [default]]


def attention_overrides(kind: str, vit: ViTConfig) -> dict[str, Any]:
    """The ViT config fields that give ``vit`` attention ``kind``, sized to its patch grid (h x w
    tokens, N = h w): ``window`` -- windows of side min(h, w) // 2 (at least 1; shifted in every other
    block), class and register tokens dropped for mean pooling, which windows need; ``lowrank`` --
    keys and values projected to N // 2 rows; ``latent`` -- N // 4 latent tokens; ``linear``, ``lsa``
    -- the kind alone. ``full`` (the registered model's own attention) and ``tome`` (merging is
    applied after training) change nothing."""
    if kind in ("full", "tome"):
        return {}
    (height, width), patch = vit.img_size, vit.patch_size
    gh, gw = height // patch, width // patch
    n = gh * gw
    sized = {"window": {"window_size": max(1, min(gh, gw) // 2)},
             "lowrank": {"lowrank_k": max(1, n // 2)},
             "latent": {"num_latents": max(1, n // 4)}}.get(kind, {})
    if kind == "window" and (vit.class_token or vit.reg_tokens):
        sized.update(class_token=False, reg_tokens=0, pool="mean")
    return {"attention": kind, **sized}


def tome_schedule(num_patches: int, depth: int) -> list[int]:
    """Tokens merged per block for the ``tome`` variant: half the patch tokens in all, front-loaded
    (:func:`~vitlab.models.front_loaded`, more merges in early blocks), at least one per block."""
    return front_loaded(max(1, round(num_patches / (2 * depth))), depth)


def with_tome(model: VisionTransformer, img_size: tuple[int, int]) -> TokenMergingViT:
    """``model`` merging tokens by :func:`tome_schedule` for images of ``img_size``."""
    return apply_tome(model, tome_schedule(math.prod(model.grid_size(*img_size)), len(model.blocks)))


def vit_overrides(config: CompareConfig, shape: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The ViT's config overrides in a cell with axis ``values``: its patch size and attention."""
    overrides = {"patch_size": values["patch"]}
    attention = values.get("attention", VARIANTS["attention"])
    return {**overrides, **attention_overrides(attention, get_config(config.vit, **shape, **overrides))}


@dataclass
class RunPlan:
    """One training run: ``kind`` ("vit" or "cnn"), the registered ``model`` with ``overrides``,
    the shared axes' ``train`` fields, and the ``axes`` values it stands for (a CNN has no ViT-only
    axes). ``params`` is its trainable parameter count for the data's shape; ``teacher`` the key of
    the CNN run it distils from (planned before it)."""
    key: str
    kind: str
    model: str
    overrides: dict[str, Any]
    train: dict[str, Any]
    axes: dict[str, Any]
    params: int
    teacher: str | None = None


@dataclass
class Cell:
    """One grid point: its axis values and the keys of the ViT run and the matched CNN run."""
    axes: dict[str, Any]
    vit: str
    cnn: str


@dataclass
class Plan:
    """The expanded grid: the axes, every cell, and the distinct runs they need (in run order)."""
    axes: list[Axis]
    cells: list[Cell]
    runs: list[RunPlan]


def data_shape(splits: DataSplits) -> dict[str, Any]:
    """The model fields the data fixes: ``num_classes``, ``in_chans``, ``img_size``."""
    chans, height, width = splits.image_shape
    return {"num_classes": splits.num_classes, "in_chans": chans, "img_size": (height, width)}


def model_params(name: str, **overrides: Any) -> int:
    """Trainable parameters of ``create_model(name, **overrides)``."""
    return count_params(create_model(name, **overrides))


def _run_key(kind: str, values: dict[str, Any], overrides: dict[str, Any]) -> str:
    settings = ",".join(f"{k}={'full' if k == 'rows' and v is None else v}" for k, v in values.items())
    extra = "" if kind == "vit" else ",widths=" + "-".join(map(str, overrides["widths"]))
    return f"{kind}:{settings}{extra}"


def plan_compare(config: CompareConfig, shape: dict[str, Any]) -> Plan:
    """Expand ``config`` into cells and runs for data of ``shape`` (see :func:`data_shape`).

    Raises ``ValueError`` when a patch size does not divide the image, or when the CNN family cannot
    get within ``param_tolerance`` of the ViT's parameter count.
    """
    height, width = shape["img_size"]
    for patch in config.patches:
        if height % patch or width % patch:
            raise ValueError(f"patch {patch} of --patches {','.join(map(str, config.patches))}: "
                             f"{divisibility_error(height, width, patch)}")
    axes = grid_axes(config)
    cnn_base = get_config(config.cnn)
    matched: dict[str, tuple[int, dict[str, Any], int]] = {}    # ViT overrides -> (params, CNN overrides, params)

    def match(vit_overrides: dict[str, Any]) -> tuple[int, dict[str, Any], int]:
        key = repr(sorted(vit_overrides.items()))
        if key not in matched:
            vit_params = model_params(config.vit, **shape, **vit_overrides)
            budget = cnn_for_budget(vit_params, shape["img_size"], shape["in_chans"], shape["num_classes"],
                                    stages=len(cnn_base.widths), convs_per_stage=cnn_base.convs_per_stage,
                                    norm=cnn_base.norm, dropout=cnn_base.dropout)
            cnn_overrides = {"widths": list(budget.widths)}
            cnn_params = model_params(config.cnn, **shape, **cnn_overrides)
            if abs(cnn_params - vit_params) > config.param_tolerance * vit_params:
                raise ValueError(f"the closest {config.cnn} has {cnn_params:,} parameters against the ViT's "
                                 f"{vit_params:,} at {vit_overrides}: more than ±{config.param_tolerance:.0%} "
                                 f"apart; choose another --cnn family or ViT")
            matched[key] = vit_params, cnn_overrides, cnn_params
        return matched[key]

    runs: dict[str, RunPlan] = {}
    cells: list[Cell] = []
    for combo in product(*(axis.values for axis in axes)):
        values = {axis.name: value for axis, value in zip(axes, combo)}
        shared = {axis.name: value for axis, value in zip(axes, combo) if not axis.vit_only}
        train_fields = {axis.field: value for axis, value in zip(axes, combo) if not axis.vit_only}
        overrides = vit_overrides(config, shape, values)
        vit_params, cnn_overrides, cnn_params = match(overrides)
        cnn = RunPlan(_run_key("cnn", shared, cnn_overrides), "cnn", config.cnn, cnn_overrides, train_fields,
                      shared, cnn_params)
        distil = values.get("distill", VARIANTS["distill"]) == "cnn"
        vit = RunPlan(_run_key("vit", values, overrides), "vit", config.vit, overrides, train_fields,
                      values, vit_params, teacher=cnn.key if distil else None)
        for run in ((cnn, vit) if distil else (vit, cnn)):
            runs.setdefault(run.key, run)
        cells.append(Cell(values, vit.key, cnn.key))
    return Plan(axes, cells, list(runs.values()))


@dataclass
class RunRecord:
    """What one training run measured.

    ``gap`` = ``final_train_acc - best_val_acc``: the last epoch's training accuracy (on the
    augmented batches, in training mode) minus the best validation accuracy over the epochs.
    ``val_ece`` is the validation ECE at the best epoch; ``test_acc`` that of the final weights
    (``None`` without a test split). ``curves`` holds per-epoch ``train_acc``, ``val_acc``,
    ``train_loss``, ``val_loss``. ``train_rows`` is the number of training images actually used.
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
    val_ece: float
    test_acc: float | None
    seconds: float
    curves: dict[str, list[float]]
    images_per_s: float | None = None
    peak_mb: float | None = None
    agreement: float | None = None
    tome_r: list[int] | None = None

    @property
    def label(self) -> str:
        """``ViT patch 2`` / ``ViT patch 2, window attention`` / ``CNN 39-77-154``: the model as the
        tables and plots name it."""
        if self.kind == "vit":
            variants = [variant_words(name, self.axes[name]) for name in VARIANTS if name in self.axes]
            return ", ".join([f"ViT patch {self.axes['patch']}", *variants])
        return "CNN " + "-".join(map(str, self.widths))

    @property
    def final_val_acc(self) -> float:
        """Validation accuracy of the final weights (a ``tome`` run's merged model's)."""
        return self.best_val_acc if self.tome_r is not None else self.curves["val_acc"][-1]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label, "final_val_acc": self.final_val_acc}


@dataclass
class CompareResult:
    """What :func:`run_compare` returns: the config, the plan, every run's record (by run key),
    the data's description, the study's wall time and this process's CPU time over it (with one
    thread and no competition for the core, about the wall time); ``files`` lists what was written;
    ``attention`` names the best ViT run and its per-head attention figures (when files are written)."""
    config: CompareConfig
    plan: Plan
    records: dict[str, RunRecord]
    data: dict[str, Any]
    seconds: float
    cpu_seconds: float
    files: dict[str, Path] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)


ProgressFn = Callable[[int, int, RunPlan, "RunRecord | None"], None]


def record_run(run: RunPlan, result: TrainResult, splits: DataSplits, seconds: float | None = None) -> RunRecord:
    """A :class:`RunRecord` from a plan and its :class:`~vitlab.train.TrainResult` on ``splits``
    (``seconds`` replaces the training's own wall time, e.g. to add pretraining); a ``tome`` run
    evaluates ``result.model`` with merging (see :class:`RunRecord`)."""
    history = result.history
    best = next(r for r in history if r["epoch"] == result.best_epoch)
    curves = {k: [r[k] for r in history] for k in ("train_acc", "val_acc", "train_loss", "val_loss")}
    fields = dict(best_val_acc=result.best_val_acc, best_epoch=result.best_epoch, val_ece=best["val_ece"],
                  test_acc=result.test["acc"] if result.test is not None else None)
    if run.axes.get("attention") == "tome":
        model = result.model
        merged = with_tome(model, splits.image_shape[1:])
        device = next(model.parameters()).device

        def logits(net: nn.Module, data: ImageDataset) -> torch.Tensor:
            return predict_logits(net, data.images.to(device), splits.mean, splits.std).cpu()
        val = classification_report(merged_val := logits(merged, splits.val), splits.val.labels, splits.val.classes)
        test = None if splits.test is None else classification_report(logits(merged, splits.test), splits.test.labels,
                                                                       splits.test.classes)
        agreement = (merged_val.argmax(-1) == logits(model, splits.val).argmax(-1)).float().mean().item()
        fields = dict(best_val_acc=val["accuracy"], best_epoch=history[-1]["epoch"], val_ece=val["ece"],
                      test_acc=None if test is None else test["accuracy"], agreement=agreement,
                      tome_r=list(merged.r))
    return RunRecord(
        key=run.key, kind=run.kind, model=run.model,
        widths=list(run.overrides["widths"]) if run.kind == "cnn" else None, axes=run.axes,
        train_rows=len(splits.train), params=result.params, final_train_acc=result.train_acc,
        gap=result.train_acc - fields["best_val_acc"],
        seconds=result.seconds if seconds is None else seconds, curves=curves, **fields)


def _architecture(run: RunPlan) -> str:
    distilled, tome = run.teacher is not None, run.axes.get("attention") == "tome"
    return repr((run.model, sorted(run.overrides.items()), distilled, tome))


def measure_forward(plan: Plan, records: dict[str, RunRecord], shape: dict[str, Any], images: torch.Tensor) -> None:
    """Fill every record's ``images_per_s`` and ``peak_mb``: the forward cost of its architecture
    (model and overrides, distillation token, token merging) on ``images (B, C, H, W)`` (normalised,
    on the device to measure on). Weights do not change the cost, so each distinct architecture is
    built fresh once, and all are timed together in alternating rounds
    (:func:`~vitlab.train.measure.forward_costs`): load that changes during a long study cannot
    favour one run over another."""
    models: dict[str, nn.Module] = {}
    for run in plan.runs:
        if (key := _architecture(run)) not in models:
            model = create_model(run.model, **shape, **run.overrides)
            model = distilled_from(model) if run.teacher is not None else model
            model = with_tome(model, shape["img_size"]) if run.axes.get("attention") == "tome" else model
            models[key] = model.to(images.device)
    costs = forward_costs(models, images)
    for run in plan.runs:
        cost = costs[_architecture(run)]
        records[run.key].images_per_s, records[run.key].peak_mb = cost["images_per_s"], cost["peak_mb"]


def train_config(config: CompareConfig, run: RunPlan) -> TrainConfig:
    """The :class:`~vitlab.train.TrainConfig` of one run: the study's recipe, epochs, data and
    device, the run's model and overrides, and its shared axes' fields (``augment="recipe"`` keeps
    the recipe's augmentation). Pretraining and the teacher are added by :func:`run_compare`."""
    given = {k: v for k, v in run.train.items() if not (k == "augment" and v == RECIPE_AUGMENT)}
    return TrainConfig.from_recipe(config.recipe, model=run.model, model_overrides=run.overrides,
                                   dataset=config.dataset, data_dir=config.data_dir, epochs=config.epochs,
                                   device=config.device, **given)


def run_compare(config: CompareConfig, progress: ProgressFn | None = None) -> CompareResult:
    """Train every run of the grid and, if ``config.out_dir`` is set, write the report there.

    ``progress(index, total, run, record)`` is called before each run (``record=None``) and after it
    (with its :class:`RunRecord`); ``index`` counts from 1.
    """
    start, cpu_start = time.perf_counter(), time.process_time()
    splits_cache: dict[tuple[int, Any], DataSplits] = {}

    def splits_for(seed: int, rows: int | None) -> DataSplits:
        if (seed, rows) not in splits_cache:
            splits_cache.clear()                       # runs come grouped by (seed, rows)
            splits_cache[seed, rows] = load_dataset(config.dataset, config.data_dir, seed=seed, rows=rows)
        return splits_cache[seed, rows]

    full = splits_for(0, None)
    pool = len(full.train)
    too_many = [r for r in config.rows if r is not None and r > pool]
    if too_many:
        raise ValueError(f"rows {too_many} exceed the {config.dataset} training pool of {pool:,} images: "
                         f"choose rows <= {pool:,} or 'full'")
    plan = plan_compare(config, data_shape(full))
    data = {"dataset": full.name, "image_shape": list(full.image_shape), "num_classes": full.num_classes,
            "pool": pool, "val": len(full.val), "test": len(full.test) if full.test is not None else None}
    records: dict[str, RunRecord] = {}
    best_vit: tuple[RunRecord, TrainResult, DataSplits] | None = None
    teachers = {run.teacher for run in plan.runs if run.teacher is not None}
    trained: dict[str, TrainResult] = {}            # by TrainConfig: a tome run reuses its full-attention twin
    with tempfile.TemporaryDirectory(prefix="vitlab-compare-") as tmp:
        encoders: dict[str, tuple[str, float]] = {}  # by (seed, method, ViT shape): checkpoint, seconds

        def encoder(method: str, run: RunPlan) -> tuple[str, float]:
            key = repr((run.train["seed"], method, sorted(run.overrides.items())))
            if key not in encoders:
                began, out = time.perf_counter(), str(Path(tmp) / f"pretrain-{len(encoders)}")
                pretrain(PretrainConfig(method=method, model=run.model, model_overrides=run.overrides,
                                        dataset=config.dataset, data_dir=config.data_dir, images=config.pretrain_images,
                                        seed=run.train["seed"], epochs=config.pretrain_epochs, device=config.device,
                                        out_dir=out))
                encoders[key] = out, time.perf_counter() - began
            return encoders[key]

        for index, run in enumerate(plan.runs, 1):
            if progress is not None:
                progress(index, len(plan.runs), run, None)
            splits = splits_for(run.train["seed"], run.train["rows"])
            cfg, pretrain_seconds = train_config(config, run), 0.0
            if run.axes.get("pretrain", "none") != "none":
                init, pretrain_seconds = encoder(run.axes["pretrain"], run)
                cfg = replace(cfg, init=init, layer_decay=config.layer_decay)
            if run.teacher is not None:
                cfg = replace(cfg, teacher=str(Path(tmp) / f"teacher-{sorted(teachers).index(run.teacher)}"),
                              distill=config.distill_kind, distill_temperature=config.distill_temperature,
                              distill_alpha=config.distill_alpha)
            if run.key in teachers:
                cfg = replace(cfg, out_dir=str(Path(tmp) / f"teacher-{sorted(teachers).index(run.key)}"))
            result = trained.get(repr(cfg)) or train(cfg, splits)
            if "tome" in config.attention and run.kind == "vit":
                trained[repr(cfg)] = result
            records[run.key] = record = record_run(run, result, splits, result.seconds + pretrain_seconds)
            device = next(result.model.parameters()).device
            if (run.kind == "vit" and run.axes.get("attention", "full") in ("full", "lsa")
                    and (best_vit is None or record.best_val_acc > best_vit[0].best_val_acc)):
                best_vit = (record, result, splits)
            if progress is not None:
                progress(index, len(plan.runs), run, record)
    measure_forward(plan, records, data_shape(full), normalize(full.val.images[:256].to(device), full.mean, full.std))
    result = CompareResult(config, plan, records, data, time.perf_counter() - start,
                           time.process_time() - cpu_start)
    if config.out_dir is not None:
        if best_vit is not None:
            record, best, splits = best_vit
            figures = attention_examples(best.model, splits, n_correct=2, n_wrong=2,
                                         out_dir=Path(config.out_dir) / "attention")
            result.attention = {"run": record.key, "label": record.label,
                                "files": [str(Path(f).relative_to(config.out_dir)) for f in figures]}
        result.files = write_report(result, config.out_dir)
    return result

