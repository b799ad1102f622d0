"""ViT against a CNN of the same size: ``run_compare(CompareConfig) -> CompareResult``.

The textbook's mini-project as one grid. Each **cell** is one combination of axis values (seed,
training rows, augmentation preset, ViT patch size, ...); in it a ViT and a CNN train with the same
data, seed, recipe (optimiser, schedule, epochs) and augmentation. The CNN is sized by
:func:`~vitlab.models.cnn_for_budget` to the parameter count of the ViT *at that patch size* and must
land within ``param_tolerance`` of it (±15% by default).

The grid is a list of :class:`~vitlab.experiments.axes.Axis`. An axis either sets a
:class:`~vitlab.engine.TrainConfig` field for both models (rows, augment, seed) or applies to one model
only: the ViT's patch size and the variant axes of :data:`~vitlab.experiments.axes.VARIANTS`, each in the
grid only when the study lists something besides its default, and the CNN the ViT meets (``cnns``:
``matched``, the default, or ``textbook``, the plain convnet at the textbook's size of
:data:`~vitlab.experiments.textbook.TEXTBOOK_CNN`):

- ``attention``: ``full`` (the registered model), a cheaper kind from :mod:`vitlab.layers.attention`
  (``window``, ``linear``, ``lowrank``, ``latent``, ``lsa``, ``sparse``; sized to the patch grid by
  :func:`~vitlab.experiments.variants.attention_overrides`), or ``tome``: the full-attention model, trained
  once, evaluated with token merging (:func:`~vitlab.experiments.variants.tome_schedule`) -- no retraining,
  so accuracy, speed and memory say what merging costs and saves.
- ``pretrain``: ``none`` (from scratch), ``mae`` or ``dino``: the ViT is pretrained without labels
  (:func:`vitlab.tasks.ssl.pretrain`, once per seed and ViT shape) and fine-tuned from it with layer-wise
  learning-rate decay on the cell's labelled rows.
- ``distill``: ``none`` or ``cnn``: the ViT gets a DeiT distillation token and learns from the cell's own
  size-matched CNN (trained first, same rows and seed) as its teacher.
- ``position``: ``abs`` (the registered model's absolute positions), ``sincos`` (fixed 2-D sinusoids),
  ``rowcol`` (learned row + column vectors), ``rope`` (rotary angles on queries and keys), ``rel`` (a
  relative position bias in every block, no absolute positions), ``rel-shared`` (one bias table for all
  blocks) or ``none``.
- ``stem``: ``patch`` (the registered patchify embedding), ``conv`` (Xiao et al.'s stride-2 conv stem) or
  ``resnet`` (timm's ResNetV2 stem, as in its hybrid ViTs) before the patch projection.
- ``pool``: ``mean`` (over the patch tokens), ``token`` (a class token, read by the head) or ``max``.
- the texts' pitfalls as switches: ``block`` (``prenorm`` or ``postnorm``), ``norm`` (``layernorm`` or
  ``batchnorm`` inside the blocks), ``mask`` (``none`` or ``causal``), ``stride`` (``patch``: tiling
  patches, or a number of pixels below the patch: an overlapping tokenizer).
- ViT-only training settings: ``lr`` and ``warmup`` (epochs of linear warmup), ``None`` for the recipe's;
  the CNN keeps the recipe's, so it is trained once for all their values.

A run whose loss stops being finite is recorded as ``diverged``, its accuracies those of a constant guess of
the validation split's most frequent class (:func:`~vitlab.experiments.scoring.diverged_record`), and the
study goes on. The CNN of each cell is matched to that cell's ViT, so a variant that changes the ViT's
parameter count (a stem, a bias table, a class token) may change the CNN's widths. A combination of values
that cannot be built (a stem that cannot reduce to the patch size, a relative bias on attention that forms
no bias-able scores, window attention with a class or distillation token, ...) is skipped, with the reason
in :attr:`~vitlab.experiments.records.Plan.skipped` and the report
(:func:`~vitlab.experiments.variants.skip_reason`); a study whose every combination is skipped is refused
before any training.

With ``robustness`` every run's model is also scored with patches masked and centre-cropped after its
training (:mod:`~vitlab.explain.robustness`), in the run's own task.

A run is identified by what it trains, so when two patch sizes give the ViT the same parameter count
(as patches 2 and 4 do for ``vit-digits``) the matched CNN is trained once per (seed, rows, augment)
and paired with both. Every run's record also holds its forward cost on a validation batch
(images per second, peak memory), measured after the grid in this process.

Runs are independent but for what one makes for another (a teacher, a pretrained encoder, a trained model
that ToMe evaluates): :func:`~vitlab.experiments.execution.execute` groups such runs into one task and hands
the tasks to an executor (:mod:`~vitlab.experiments.executors`: this machine's cores or a Ray cluster).
Every run seeds itself from its own plan entry, so the records do not depend on where or in which order the
tasks ran (at a fixed number of torch threads per run: the thread count changes float rounding).

Nothing is written unless ``out_dir`` is set; then :func:`~vitlab.experiments.report.write_report`
writes ``results.json``, ``report.md`` and the figures there.
"""

from __future__ import annotations

import io
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..explain import attention_examples
from ..runs.layout import MODELS
from .config import CompareConfig
from .execution import RunOutcome, execute
from .executors import Executor, LocalExecutor
from .files import open_study, write_file
from .plan import build_architecture, data_shape, load_splits, plan_compare
from .records import CompareResult, Plan, ProgressFn, RunPlan, RunRecord
from .report import write_report
from .training import forward_costs


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


def keep_models(config: CompareConfig, plan: Plan, outcomes: dict[str, RunOutcome]) -> list[str]:
    """Write every trained run's checkpoint into ``config.out_dir / models`` as ``NN-LABEL.safetensors`` (plan
    order), so ``vitlab evaluate`` / ``vitlab explore`` can read each model the study trained; the files written."""
    files = []
    for number, run in enumerate(plan.runs):
        outcome = outcomes[run.key]
        if outcome.checkpoint is None:
            continue
        slug = "".join(c if c.isalnum() else "-" for c in outcome.record.label.lower()).strip("-")
        files.append(f"{MODELS}/{number:02d}-{'-'.join(filter(None, slug.split('-')))}.safetensors")
        write_file(Path(str(config.out_dir)) / files[-1], outcome.checkpoint)
    return files


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
    measure_forward(plan, records, shape, full.normalize(sample.to(device)))
    result = CompareResult(config, plan, records, data, 0.0, 0.0, execution=executor.describe())
    if config.out_dir is not None:
        result.attention = attention_figures(config, plan, outcomes, shape, device)
        keep_models(config, plan, outcomes)
    result.seconds = time.perf_counter() - start
    result.cpu_seconds = task_cpu + (cpu_before - cpu_start) + (time.process_time() - cpu_between)
    if config.out_dir is not None:
        result.files = write_report(result, config.out_dir)
    return result
