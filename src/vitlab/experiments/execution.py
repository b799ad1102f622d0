"""Running a plan: its runs grouped by what one makes for another (:func:`run_groups`), each group
trained by one worker (:func:`train_group`), the groups handed to an executor (:func:`execute`,
:func:`execute_many`; :mod:`~vitlab.experiments.executors`: this machine's cores or a Ray cluster).
Every run seeds itself from its own plan entry, so the records do not depend on where or in which
order the groups ran."""

from __future__ import annotations

import io
import math
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from torch import nn

from ..data import DataSplits
from ..errors import DivergenceError
from ..explain.robustness import Probes
from ..models import ViTConfig, get_config
from ..runs import DataConfig
from ..runs.checkpoint import checkpoint_bytes
from ..settings import picked
from .axes import RECIPE_AUGMENT
from .config import CompareConfig
from .executors import Executor
from .plan import load_splits
from .records import Plan, ProgressFn, RunPlan, RunRecord
from .scoring import diverged_record, record_run
from .training import RunResult, TrainConfig, pretrain_run, train_run


def train_config(config: CompareConfig, run: RunPlan) -> TrainConfig:
    """The :class:`~vitlab.engine.TrainConfig` of one run: the study's recipe, epochs, data and
    device, the run's model and overrides, and its shared axes' fields (``augment="recipe"`` keeps
    the recipe's augmentation). Pretraining and the teacher are added by :func:`train_group`."""
    given = {k: v for k, v in run.train.items() if not (k == "augment" and v == RECIPE_AUGMENT)}
    study = picked(config, "dataset", "data_dir", "epochs", "device")
    return TrainConfig.from_recipe(config.recipe, model=run.model, model_overrides=run.overrides, **study, **given)


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
class RunGroup:
    """What one worker trains: the study's config and a group of runs (see :func:`run_groups`)."""

    config: CompareConfig
    runs: list[RunPlan]


@dataclass
class RunOutcome:
    """A run's record and, for a ViT that may be the study's best (:func:`_figure_candidate`), its
    trained weights (``torch.save`` of the state dict, CPU tensors) for the report's attention figures;
    for a study written to a folder, the trained model as a vitlab checkpoint (:func:`_checkpoint`), which the
    study keeps so that ``vitlab evaluate`` and ``vitlab explore`` can read every model it trained."""

    record: RunRecord
    weights: bytes | None = None
    checkpoint: bytes | None = None


@dataclass
class GroupResult:
    """Each run's outcome by key, and the CPU seconds the worker process spent on the group."""

    outcomes: dict[str, RunOutcome]
    cpu_seconds: float


def _state_bytes(model: nn.Module) -> bytes:
    buffer = io.BytesIO()
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, buffer)
    return buffer.getvalue()


def _checkpoint(config: CompareConfig, run: RunPlan, result: RunResult, splits: DataSplits) -> bytes:
    """``run``'s trained model (the weights validation chose) as a vitlab checkpoint: its data config says how it
    was fed (the study's dataset, seed and rows), its provenance which cell of the study it is."""
    data = DataConfig.from_splits(splits, data_dir=config.data_dir, seed=run.train["seed"], rows=run.train["rows"])
    kind = "distilled-classifier" if run.teacher is not None else "classifier"
    cell = {"run": run.key, "kind": run.kind, **run.axes}
    return checkpoint_bytes(result.model, kind, data, name=run.model, provenance={"study_cell": cell})


class _Workspace:
    """A group's temporary folder: the checkpoints of its teachers (``teacher-<i>``) and of its pretrained
    encoders (``pretrain-<i>``, made once per seed, method and ViT shape), and each run's training config
    with them."""

    def __init__(self, config: CompareConfig, runs: Sequence[RunPlan], folder: str) -> None:
        self.config, self.folder = config, Path(folder)
        self.teachers = sorted({run.teacher for run in runs if run.teacher is not None})
        self.encoders: dict[str, tuple[str, float]] = {}  # by encoder key: checkpoint folder, seconds

    def encoder(self, run: RunPlan) -> tuple[str, float]:
        """The folder of ``run``'s pretrained encoder and the seconds its pretraining took."""
        config = self.config
        if (key := _encoder_key(run)) not in self.encoders:
            began, out = time.perf_counter(), str(self.folder / f"pretrain-{len(self.encoders)}")
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
            self.encoders[key] = out, time.perf_counter() - began
        return self.encoders[key]

    def run_config(self, run: RunPlan) -> tuple[TrainConfig, float]:
        """``run``'s training config (:func:`train_config`, fine-tuned from its encoder, distilled from its
        teacher, saved when it is a teacher) and the seconds its pretraining took (0 without)."""
        config = self.config
        cfg, pretrain_seconds = train_config(config, run), 0.0
        if run.kind == "vit" and config.init is not None:
            cfg = replace(cfg, init=config.init, layer_decay=config.layer_decay)
        if run.axes.get("tune", "full") != "full":
            cfg = replace(cfg, tune=run.axes["tune"])
        if run.axes.get("pretrain", "none") != "none":
            init, pretrain_seconds = self.encoder(run)
            cfg = replace(cfg, init=init, layer_decay=config.layer_decay)
        if run.teacher is not None:
            cfg = replace(
                cfg,
                teacher=str(self.folder / f"teacher-{self.teachers.index(run.teacher)}"),
                distill=config.distill_kind,
                distill_temperature=config.distill_temperature,
                distill_alpha=config.distill_alpha,
            )
        if run.key in self.teachers:
            cfg = replace(cfg, out_dir=str(self.folder / f"teacher-{self.teachers.index(run.key)}"))
        return cfg, pretrain_seconds


def train_group(group: RunGroup) -> GroupResult:
    """Train a group's runs in order (in whichever process or machine calls it): teachers are saved
    to and read from a temporary folder, pretrained encoders are made once per seed, method and ViT
    shape, and a run whose training configuration was already trained reuses that training. Every
    training seeds itself from its run's own fields."""
    cpu_start, config = time.process_time(), group.config
    cache: dict[tuple[int, int | None], DataSplits] = {}

    def splits_for(seed: int, rows: int | None) -> DataSplits:
        if (seed, rows) not in cache:
            cache.clear()  # runs come grouped by (seed, rows)
            cache[seed, rows] = load_splits(config, seed, rows)
        return cache[seed, rows]

    probes = Probes(tuple(config.mask_fractions), tuple(config.crop_fractions)) if config.robustness else None
    outcomes: dict[str, RunOutcome] = {}
    trained: dict[str, RunResult] = {}
    diverged: dict[str, float] = {}  # training config -> seconds until its loss stopped being finite
    with tempfile.TemporaryDirectory(prefix="vitlab-compare-") as tmp:
        workspace = _Workspace(config, group.runs, tmp)
        for run in group.runs:
            splits = splits_for(run.train["seed"], run.train["rows"])
            cfg, pretrain_seconds = workspace.run_config(run)
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
            outcomes[run.key] = RunOutcome(
                record,
                _state_bytes(result.model) if _figure_candidate(run) else None,
                _checkpoint(config, run, result, splits) if config.out_dir is not None else None,
            )
    return GroupResult(outcomes, time.process_time() - cpu_start)


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
        (index, RunGroup(config, runs))
        for index, (config, plan) in enumerate(studies)
        for runs in run_groups(config, plan)
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
    for position, result in executor.map(train_group, [group for _, group in tagged]):
        study = tagged[position][0]
        cpu_seconds += result.cpu_seconds
        for key, outcome in result.outcomes.items():
            found[study][key] = outcome
            done += 1
            if progress is not None:
                progress(done, total, by_key[study][key], outcome.record)
    return [{run.key: found[i][run.key] for run in plan.runs} for i, (_, plan) in enumerate(studies)], cpu_seconds
