"""A classification run in one call: ``train(TrainConfig) -> TrainResult``, and ``evaluate_checkpoint``.

``train`` loads the data, builds the model (starting from ``init``'s matching weights, with a
distillation token when there is a ``teacher``), opens the run folder, and hands a
:class:`~vitlab.engine.classify.ClassificationTask` to the one training loop,
:func:`~vitlab.engine.fit`. Checkpoints of any source (:func:`vitlab.runs.load_checkpoint`) serve as
``init`` and ``teacher``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from torch import nn

from ..data import DataSplits, load_dataset
from ..engine import ClassificationTask, Reporter, TrainConfig, build_model, fit, seed_everything
from ..engine.evaluate import evaluate_model
from ..errors import CheckpointError, ConfigError, DataError
from ..runs import Loaded, RunDir, load_checkpoint, load_matching_weights
from ..runs.layout import EVALUATION

SPLITS = ("test", "val", "train")


@dataclass
class TrainResult:
    """What :func:`train` returns. ``model`` is the one chosen by validation (best epoch; the EMA
    when ``ema_decay`` is set), unwrapped, in eval mode; ``test`` (``loss``, ``acc``, ``ece``) is
    measured on it (None without a test split). ``seconds`` sums the epochs' wall time."""

    config: TrainConfig
    model: nn.Module
    history: list[dict[str, Any]]
    best_val_acc: float
    best_epoch: int
    train_acc: float
    test: dict[str, float] | None
    seconds: float
    params: int
    checkpoints: dict[str, Path]


def load_splits(config: TrainConfig) -> DataSplits:
    """The dataset ``config`` names, split with its seed and row budget."""
    return load_dataset(
        config.dataset, config.data_dir, seed=config.seed, rows=config.rows, normalization=config.normalization
    )


def load_teacher(source: str) -> Loaded:
    """The teacher checkpoint at ``source``. Options such as ``--set num_heads=N`` describe the
    student, so a foreign file that needs them to load is refused with the way to describe it: write
    it as a vitlab checkpoint with ``vitlab convert`` first."""
    try:
        return load_checkpoint(source)
    except CheckpointError as error:
        if not isinstance(error.__cause__, ConfigError):  # not a missing setting: the file itself is at fault
            raise
        raise ConfigError(
            f"teacher {source}: {error.__cause__}; here --set and --model describe the student, so write the "
            f"teacher as a vitlab checkpoint first: vitlab convert {source} teacher.safetensors --num-heads N "
            f"(or --model NAME, --set FIELD=VALUE), then --teacher teacher.safetensors"
        ) from None


def build_student(config: TrainConfig, splits: DataSplits) -> tuple[nn.Module, nn.Module | None]:
    """The model to train (from ``init`` when given; with a distillation token when distilling) and
    the frozen teacher (or None)."""
    teacher = None
    if config.teacher is None:
        model = build_model(config, splits)
    else:
        loaded = load_teacher(config.teacher)
        if loaded.kind not in ("classifier", "distilled-classifier"):
            raise CheckpointError(
                f"teacher {config.teacher} is a {loaded.kind} checkpoint, not a classifier: train "
                f"one with `vitlab train` first"
            )
        outputs = getattr(loaded.model.config, "num_classes", None)
        if outputs != splits.num_classes:
            raise CheckpointError(
                f"teacher {config.teacher} has {outputs} outputs but {splits.name} has "
                f"{splits.num_classes} classes: distil from a classifier of this dataset"
            )
        teacher = loaded.model
        model = build_model(replace(config, model_overrides={**config.model_overrides, "distill_token": True}), splits)
    if config.init is not None:
        load_matching_weights(model, config.init, img_size=splits.image_shape[1:])
    return model, teacher


def train(config: TrainConfig, splits: DataSplits | None = None, reporter: Reporter | None = None) -> TrainResult:
    """Train ``config.model`` on ``splits`` (default: the dataset ``config`` names); with
    ``config.out_dir``, write the run folder (see :class:`vitlab.runs.RunDir`)."""
    splits = splits or load_splits(config)
    if len(splits.val) == 0:
        raise DataError(f"{splits.name} has an empty validation split: use more images per class")
    seed_everything(config.seed)  # the initial weights follow the run's seed
    model, teacher = build_student(config, splits)
    run_dir = RunDir(config.out_dir) if config.out_dir is not None else None
    fitted = fit(ClassificationTask(model, splits, config, teacher), config, run_dir, reporter)
    history = fitted.history
    result = TrainResult(
        config=config,
        model=fitted.model,
        history=history,
        best_val_acc=fitted.best_score if fitted.best_score is not None else float("nan"),
        best_epoch=fitted.best_epoch,
        train_acc=history[-1]["train_acc"] if history else float("nan"),
        test=fitted.test,
        seconds=fitted.seconds,
        params=fitted.params,
        checkpoints=fitted.checkpoints,
    )
    if run_dir is not None and fitted.checkpoints:
        summary = {
            k: getattr(result, k) for k in ("best_val_acc", "best_epoch", "train_acc", "test", "seconds", "params")
        }
        run_dir.write_summary({**summary, "test_on": "the checkpoint chosen by validation (best/)"})
    return result


def evaluate_checkpoint(
    source: str | Path | Loaded,
    *,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    split: str = "test",
    temperature_scale: bool = False,
    out_dir: str | Path | None = None,
    overwrite: bool = False,
    device: str = "cpu",
) -> dict[str, Any]:
    """Evaluate a classifier checkpoint (any source) on a split of its dataset (or of ``dataset``).

    The splits are the training run's (name, data_dir, seed, rows recorded in the checkpoint),
    normalised with its statistics. With ``out_dir``, writes ``metrics.json``, ``reliability.png``
    and ``confusion.png`` there (a run folder of kind ``evaluate``). A model already loaded
    (:class:`~vitlab.runs.Loaded`) is used as it is, on its own device.
    """
    from ..device import resolve_device
    from ..engine.figures import plot_confusion, plot_reliability

    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}: choose one of {SPLITS}")
    loaded = source if isinstance(source, Loaded) else load_checkpoint(source, resolve_device(device))
    run_dir = RunDir(out_dir).open("evaluate", overwrite=overwrite) if out_dir is not None else None
    try:
        if loaded.kind not in ("classifier", "distilled-classifier"):
            raise CheckpointError(
                f"{loaded.path} is a {loaded.kind} checkpoint, not a classifier: "
                + (
                    "evaluate it with --task probe"
                    if loaded.kind == "encoder"
                    else "`vitlab evaluate` scores it with its own metrics"
                )
            )
        splits = loaded.splits(dataset, data_dir)
        data = getattr(splits, split)
        if data is None:
            raise DataError(
                f"{splits.name} has no {split} split here (e.g. MNIST from its test file alone): use --split val"
            )
        outputs = getattr(loaded.model.config, "num_classes", len(data.classes))
        if len(data.classes) != outputs:
            raise DataError(
                f"{loaded.path} has {outputs} outputs but {splits.name} has "
                f"{len(data.classes)} classes: evaluate it on its own dataset (--dataset)"
            )
        report = evaluate_model(
            loaded.model, data, splits.mean, splits.std, calibration=splits.val if temperature_scale else None
        )
        name = loaded.name or type(loaded.model).__name__
        report = {
            "checkpoint": str(loaded.path),
            "model": name,
            "dataset": splits.name,
            "split": split,
            **({"guessed": loaded.guessed} if loaded.guessed else {}),
            **report,
        }
        if run_dir is not None:
            run_dir.write_json(EVALUATION, report)
            title = f"{name} on {splits.name} {split}"
            plot_reliability(
                report["reliability"],
                run_dir.figure_path("reliability.png"),
                report.get("calibrated", {}).get("reliability"),
                title=title,
            )
            plot_confusion(report["confusion"], data.classes, run_dir.figure_path("confusion.png"), title=title)
        return report
    except BaseException:
        if run_dir is not None:
            run_dir.discard_if_unused()
        raise
    finally:
        if run_dir is not None:
            run_dir.close()
