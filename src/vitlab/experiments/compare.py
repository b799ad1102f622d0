"""ViT against a CNN of the same size: ``run_compare(CompareConfig) -> CompareResult``.

The textbook's mini-project as one grid. Each **cell** is one combination of axis values (seed,
training rows, augmentation preset, ViT patch size, ...); in it a ViT and a CNN train with the same
data, seed, recipe (optimiser, schedule, epochs) and augmentation. The CNN is sized by
:func:`~vitlab.models.cnn_for_budget` to the parameter count of the ViT *at that patch size* and must
land within ``param_tolerance`` of it (±15% by default).

The grid is a list of :class:`Axis`. An axis either sets a :class:`~vitlab.train.TrainConfig` field
for both models (rows, augment, seed) or a ViT config field only (patch -> ``patch_size``); new axes
(attention kind, ...) slot into :func:`grid_axes`. A run is identified by what it trains, so when two
patch sizes give the ViT the same parameter count (as patches 2 and 4 do for ``vit-digits``) the
matched CNN is trained once per (seed, rows, augment) and paired with both.

Nothing is written unless ``out_dir`` is set; then :func:`~vitlab.experiments.report.write_report`
writes ``results.json``, ``report.md`` and the figures there.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable

from ..data import DataSplits, load_dataset
from ..data.augment import PRESETS
from ..models import cnn_for_budget, count_params, create_model, get_config
from ..ops.patches import divisibility_error
from ..explain import attention_examples
from ..train import RECIPES, TrainConfig, TrainResult, train
from .figures import RECIPE_AUGMENT
from .report import write_report

# Per-dataset defaults: (ViT, CNN family, patch sizes). 28x28 data gets the textbook's model.
DEFAULT_MODELS: dict[str, tuple[str, str, tuple[int, ...]]] = {
    "digits": ("vit-digits", "cnn-digits", (2, 4)),
}
FALLBACK_MODELS = ("vit-seed", "cnn-seed", (7,))


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
    out_dir: str | None = None
    device: str = "auto"

    def __post_init__(self) -> None:
        vit, cnn, patches = DEFAULT_MODELS.get(self.dataset, FALLBACK_MODELS)
        self.vit = self.vit or vit
        self.cnn = self.cnn or cnn
        self.patches = list(self.patches) if self.patches is not None else list(patches)
        self.rows, self.augment = list(self.rows), list(self.augment)
        for name in ("rows", "patches", "augment"):
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
    :class:`~vitlab.train.TrainConfig` field it sets for both models, or, with ``vit_only``, the ViT
    config field it sets (the CNN is then matched to the ViT at each value)."""
    name: str
    field: str
    values: tuple[Any, ...]
    vit_only: bool = False


def grid_axes(config: CompareConfig) -> list[Axis]:
    """The study's axes, outermost first: seed, rows, augment, patch (so each seed's grid completes
    before the next seed starts, and runs sharing a training set are consecutive)."""
    return [Axis("seed", "seed", tuple(range(config.seeds))),
            Axis("rows", "rows", tuple(config.rows)),
            Axis("augment", "augment", tuple(config.augment)),
            Axis("patch", "patch_size", tuple(config.patches), vit_only=True)]


@dataclass
class RunPlan:
    """One training run: ``kind`` ("vit" or "cnn"), the registered ``model`` with ``overrides``,
    the shared axes' ``train`` fields, and the ``axes`` values it stands for (a CNN has no ViT-only
    axes). ``params`` is its trainable parameter count for the data's shape."""
    key: str
    kind: str
    model: str
    overrides: dict[str, Any]
    train: dict[str, Any]
    axes: dict[str, Any]
    params: int


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
        vit_overrides = {axis.field: value for axis, value in zip(axes, combo) if axis.vit_only}
        vit_params, cnn_overrides, cnn_params = match(vit_overrides)
        vit = RunPlan(_run_key("vit", values, vit_overrides), "vit", config.vit, vit_overrides, train_fields,
                      values, vit_params)
        cnn = RunPlan(_run_key("cnn", shared, cnn_overrides), "cnn", config.cnn, cnn_overrides, train_fields,
                      shared, cnn_params)
        for run in (vit, cnn):
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

    @property
    def label(self) -> str:
        """``ViT patch 2`` / ``CNN 39-77-154``: the model as the tables and plots name it."""
        if self.kind == "vit":
            return f"ViT patch {self.axes['patch']}"
        return "CNN " + "-".join(map(str, self.widths))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "label": self.label}


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


def record_run(run: RunPlan, result: TrainResult, train_rows: int) -> RunRecord:
    """A :class:`RunRecord` from a plan and its :class:`~vitlab.train.TrainResult`."""
    history = result.history
    best = next(r for r in history if r["epoch"] == result.best_epoch)
    curves = {k: [r[k] for r in history] for k in ("train_acc", "val_acc", "train_loss", "val_loss")}
    return RunRecord(
        key=run.key, kind=run.kind, model=run.model,
        widths=list(run.overrides["widths"]) if run.kind == "cnn" else None, axes=run.axes,
        train_rows=train_rows, params=result.params, best_val_acc=result.best_val_acc,
        best_epoch=result.best_epoch, final_train_acc=result.train_acc,
        gap=result.train_acc - result.best_val_acc, val_ece=best["val_ece"],
        test_acc=result.test["acc"] if result.test is not None else None, seconds=result.seconds, curves=curves)


def train_config(config: CompareConfig, run: RunPlan) -> TrainConfig:
    """The :class:`~vitlab.train.TrainConfig` of one run: the study's recipe, epochs, data and
    device, the run's model and overrides, and its shared axes' fields (``augment="recipe"`` keeps
    the recipe's augmentation)."""
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
    for index, run in enumerate(plan.runs, 1):
        if progress is not None:
            progress(index, len(plan.runs), run, None)
        splits = splits_for(run.train["seed"], run.train["rows"])
        trained = train(train_config(config, run), splits)
        records[run.key] = record = record_run(run, trained, len(splits.train))
        if run.kind == "vit" and (best_vit is None or record.best_val_acc > best_vit[0].best_val_acc):
            best_vit = (record, trained, splits)
        if progress is not None:
            progress(index, len(plan.runs), run, record)
    result = CompareResult(config, plan, records, data, time.perf_counter() - start,
                           time.process_time() - cpu_start)
    if config.out_dir is not None:
        if best_vit is not None:
            record, trained, splits = best_vit
            figures = attention_examples(trained.model, splits, n_correct=2, n_wrong=2,
                                         out_dir=Path(config.out_dir) / "attention")
            result.attention = {"run": record.key, "label": record.label,
                                "files": [str(Path(f).relative_to(config.out_dir)) for f in figures]}
        result.files = write_report(result, config.out_dir)
    return result

