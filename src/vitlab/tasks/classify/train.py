"""A classification run (:func:`build_task` for :func:`vitlab.tasks.run`), and ``evaluate_checkpoint``.

``build_task`` loads the data, builds the model (starting from ``init``'s matching weights, with a
distillation token when there is a ``teacher``), and returns the
:class:`~vitlab.tasks.classify.task.ClassificationTask` for the one training loop. Checkpoints of any
source (:func:`vitlab.runs.load_checkpoint`) serve as ``init`` and ``teacher``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from ...data import DataSplits, ImageDataset, load_dataset
from ...data.options import DataOptions
from ...data.preprocess import Preprocess, resize_images
from ...data.registry import photo_sources
from ...engine import Reporter, seed_everything
from ...engine.evaluate import evaluate_model
from ...errors import CheckpointError, ConfigError, DataError
from ...models.registry import get_config
from ...models.tuning import apply_tuning
from ...runs import Loaded, RunDir, load_checkpoint, load_matching_weights
from ...runs.layout import EVALUATION
from ...runs.loaded import placeholder_names
from ...runs.weights import run_at_size
from ..run import RunResult
from .task import INIT_MODEL, ClassificationTask, TrainConfig, build_model

SPLITS = ("test", "val", "train")


def load_splits(
    config: TrainConfig, recorded: Preprocess | None = None, progress: Callable[[int], None] | None = None
) -> tuple[DataSplits, Preprocess | None]:
    """The dataset ``config`` names, split with its seed and row budget, and the preprocessing its files
    are read with (None for a tensor dataset).

    Image files are read with ``recorded`` (the preprocessing of the model a run starts from: a timm or
    Hugging Face model's own size, crop, filter and mean/std) or else at the model's own input size, then
    every field ``config.data`` sets. ``progress(n)`` hears how many files were indexed so far.
    """
    opts = config.data
    common: dict[str, Any] = {"seed": config.seed, "rows": config.rows, "normalization": config.normalization}
    if config.dataset not in photo_sources():
        if opts.loader == "stream":
            raise ConfigError(
                f"{config.dataset} is a tensor dataset held in memory; data.loader=stream reads image files "
                f"(--dataset {'|'.join(photo_sources())})"
            )
        splits = load_dataset(config.dataset, config.data_dir, **common)
        if opts.image_size is not None:
            splits = resize_splits(splits, opts.image_size)
        return with_statistics(splits, opts.mean, opts.std), None
    base = recorded or Preprocess(image_size=model_input_size(config))
    preprocess = opts.preprocess(base)
    splits = load_dataset(
        config.dataset,
        config.data_dir,
        **common,
        preprocess=preprocess,
        loader=opts.loader,
        workers=opts.workers,
        max_bad=opts.max_bad_images,
        progress=progress,
        epochs=config.epochs,
        decode=opts.decode,
    )
    return with_statistics(splits, preprocess.mean, preprocess.std), preprocess


def describe_reading(splits: DataSplits, preprocess: Preprocess) -> str:
    """One line: how the images are read (loader and why, size, crop, filter)."""
    height, width = preprocess.image_size
    loader = getattr(splits, "loader", "memory")
    reason = getattr(splits, "loader_reason", "")
    return (
        f"{loader} ({reason}); {height}x{width}, {preprocess.crop_mode} crop_pct {preprocess.crop_pct:g}, "
        f"{preprocess.interpolation}"
    )


def model_input_size(config: TrainConfig) -> tuple[int, int]:
    """The input size ``config.model`` is registered with (224 for ``vit-tiny-patch16-224``), or 224."""
    if config.model == INIT_MODEL:
        return (224, 224)
    size = getattr(get_config(config.model, **config.model_overrides), "img_size", None)
    if size is None:
        return (224, 224)
    return (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))


def with_statistics(splits: DataSplits, mean: tuple[float, ...] | None, std: tuple[float, ...] | None) -> DataSplits:
    """``splits`` normalised with ``mean``/``std`` when given (a model's own, or the user's), else as loaded."""
    if mean is None or std is None:
        return splits
    channels = splits.image_shape[0]
    if len(mean) != channels or len(std) != channels:
        raise ConfigError(
            f"mean/std have {len(mean)} values but {splits.name} images have {channels} channels: "
            f"set --set data.mean=[...] --set data.std=[...] with {channels} values each"
        )
    return replace(splits, mean=tuple(mean), std=tuple(std))


def resize_splits(splits: DataSplits, size: int | tuple[int, int]) -> DataSplits:
    """In-memory ``splits`` resized to ``size`` (:func:`~vitlab.data.preprocess.resize_images`), e.g. 28x28
    Fashion-MNIST at 32."""
    target = (size, size) if isinstance(size, int) else (int(size[0]), int(size[1]))

    def resized(part: str) -> ImageDataset:
        data = splits.in_memory(part, "resizing")
        if tuple(data.images.shape[2:]) == target:
            return data
        return ImageDataset(resize_images(data.images, target), data.labels, data.classes)

    test = None if splits.test is None else resized("test")
    return replace(splits, train=resized("train"), val=resized("val"), test=test)


def warn_missing_classes(splits: DataSplits, only: str | None = None) -> None:
    """Say on stderr (a warning) which split holds no image of which class: its figures leave that class out
    (a class of two images cannot reach all three splits). The checkpoint's data config records it too."""
    for part, names in splits.missing_classes().items():
        if only in (None, part):
            warnings.warn(
                f"{splits.name}: the {part} split holds no image of {len(names)} class(es) "
                f"({', '.join(names[:6])}{', ...' if len(names) > 6 else ''}): its figures leave them out"
                + ("; give every class at least 3 images (one for each split)" if only is None else ""),
                stacklevel=2,
            )


class Reordered(nn.Module):
    """A classifier whose outputs are reordered: output ``j`` is ``model``'s output ``index[j]`` (a teacher's
    classes matched by name to the student's)."""

    def __init__(self, model: nn.Module, index: list[int]) -> None:
        super().__init__()
        self.model = model
        self.register_buffer("index", torch.tensor(index, dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x).index_select(-1, self.index)


def teacher_by_name(loaded: Loaded, splits: DataSplits, source: str) -> nn.Module:
    """The teacher's model, its outputs in the order of the data's classes: the same names in another order
    are matched by name (said in a warning); other names are refused. A teacher that names its outputs only by
    index is taken as it is."""
    names, have = list(loaded.data.classes), list(splits.train.classes)
    if not names or names == have or placeholder_names(names):
        return loaded.model
    if sorted(names) != sorted(have):
        raise CheckpointError(
            f"teacher {source} was trained on the classes ({', '.join(names[:6])}{', ...' if len(names) > 6 else ''}) "
            f"but {splits.name} has ({', '.join(have[:6])}{', ...' if len(have) > 6 else ''}): distil from a "
            f"classifier of this dataset's classes"
        )
    warnings.warn(
        f"teacher {source} names the classes of {splits.name} in another order: its outputs are matched by name",
        stacklevel=2,
    )
    return Reordered(loaded.model, [names.index(name) for name in have])


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


def load_init(config: TrainConfig) -> Loaded:
    """The ``init`` checkpoint; a foreign file that does not record its number of heads is read with the
    run's (``--set num_heads=N``, else the named model's), as :func:`load_matching_weights` reads it."""
    assert config.init is not None
    heads = config.model_overrides.get("num_heads")
    if heads is None and config.model != INIT_MODEL:
        heads = getattr(get_config(config.model), "num_heads", None)
    try:
        return load_checkpoint(config.init)
    except CheckpointError as error:
        if not isinstance(heads, int) or not isinstance(error.__cause__, ConfigError):
            raise
        return load_checkpoint(config.init, num_heads=heads)


def build_student(config: TrainConfig, splits: DataSplits) -> tuple[nn.Module, nn.Module | None]:
    """The model to train (from ``init`` when given; with a distillation token when distilling) and
    the frozen teacher (or None)."""
    teacher = None
    init_config = None
    if config.model == INIT_MODEL and config.init is not None:
        init_config = load_init(config).model.config
    if config.teacher is None:
        model = build_model(config, splits, init_config)
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
        teacher = teacher_by_name(loaded, splits, config.teacher)
        distilled = replace(config, model_overrides={**config.model_overrides, "distill_token": True})
        model = build_model(distilled, splits, init_config)
    if config.init is not None:
        load_matching_weights(model, config.init, img_size=splits.image_shape[1:])
    return model, teacher


def build_task(config: TrainConfig, splits: DataSplits | None, reporter: Reporter) -> ClassificationTask:
    """The engine task of a classification run on ``splits`` (default: the dataset ``config`` names, image
    files read with the ``init`` model's own preprocessing): the model starts from ``init``'s matching
    weights, with a distillation token when there is a ``teacher``. The reporter hears how the data is read."""
    preprocess = None
    if splits is None:
        recorded = None
        if config.init is not None and config.dataset in photo_sources():
            recorded = load_init(config).data.preprocess()
        splits, preprocess = load_splits(
            config, recorded, lambda n: reporter.note(f"{config.dataset}: {n:,} image files indexed")
        )
        if preprocess is not None:
            reporter.note(f"{splits.name}: {describe_reading(splits, preprocess)}")
    if len(splits.val) == 0:
        raise DataError(f"{splits.name} has an empty validation split: use more images per class")
    warn_missing_classes(splits)
    seed_everything(config.seed)  # the initial weights follow the run's seed
    model, teacher = build_student(config, splits)
    apply_tuning(model, config.tuning)
    return ClassificationTask(model, splits, config, teacher, preprocess)


def run_summary(result: RunResult) -> dict[str, Any]:
    """A classification run's ``summary.json``."""
    summary = {
        "best_val_acc": result.best_val_acc,
        "best_epoch": result.best_epoch,
        "train_acc": result.train_acc,
        "test": result.test,
        "seconds": result.seconds,
        "params": result.params,
        "cost": result.cost,
    }
    summary |= (
        {"skipped_images": {"count": len(result.skipped), "first": result.skipped[:20]}} if result.skipped else {}
    )
    return {**summary, "test_on": "the checkpoint chosen by validation (best/)"}


def run_line(result: RunResult) -> str:
    """What ``vitlab train`` prints after a classification run."""
    config = cast(TrainConfig, result.config)
    name = f"{config.init} fine-tuned" if config.model == "init" and config.init else config.model  # named by source
    line = (
        f"{name} on {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, "
        f"train acc {result.train_acc:.4f}, best val acc {result.best_val_acc:.4f} (epoch {result.best_epoch})"
    )
    if config.tune != "full" and result.cost:
        line += f", {cost_text(config.tuning.label, result.cost)}"
    if result.test is not None:
        line += (
            f", test acc {result.test['acc']:.4f} (loss {result.test['loss']:.4f}, ece "
            f"{result.test['ece']:.4f}; best epoch's weights)"
        )
    return line


def cost_text(label: str, cost: dict[str, Any]) -> str:
    """``"tune lora: 1,234 of 5,678 parameters train (21.7%), optimiser state 9.6 KiB, 0.012 s/step"``."""
    share = cost["trainable_params"] / max(1, cost["total_params"])
    return (
        f"tune {label}: {cost['trainable_params']:,} of {cost['total_params']:,} parameters train ({share:.1%}), "
        f"optimiser state {cost['optimizer_state_bytes'] / 1024:,.1f} KiB, {cost['step_seconds']:.3g} s/step"
    )


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
    options: DataOptions | None = None,
) -> dict[str, Any]:
    """Evaluate a classifier checkpoint (any source) on a split of its dataset (or of ``dataset``).

    The splits are the training run's (name, data_dir, seed, rows recorded in the checkpoint),
    normalised with its statistics. With ``out_dir``, writes ``metrics.json``, ``reliability.png``
    and ``confusion.png`` there (a run folder of kind ``evaluate``). A model already loaded
    (:class:`~vitlab.runs.Loaded`) is used as it is, on its own device.
    """
    from ...device import resolve_device

    if split not in SPLITS:
        raise DataError(f"unknown split {split!r}: choose one of {SPLITS}")
    loaded = source if isinstance(source, Loaded) else load_checkpoint(source, resolve_device(device))
    run_dir = RunDir(out_dir).open("evaluate", overwrite=overwrite) if out_dir is not None else None
    try:
        if loaded.kind not in ("classifier", "distilled-classifier"):
            raise CheckpointError(
                f"{loaded.path} is a {loaded.kind} checkpoint, not a classifier: "
                + (
                    "score its features with --linear-probe or --knn"
                    if loaded.kind == "encoder"
                    else "`vitlab evaluate` scores it with its own metrics"
                )
            )
        loaded.check_finite("temperature scaling" if temperature_scale else "scoring")
        splits = loaded.splits(dataset, data_dir, options=options)
        run_at_size(loaded.model, splits.image_shape[1:])
        data = getattr(splits, split)
        if data is None:
            raise DataError(
                f"{splits.name} has no {split} split here (e.g. MNIST from its test file alone): use --split val"
            )
        warn_missing_classes(splits, only=split)
        if not head_fits(loaded, data.classes):
            raise HeadMismatchError(
                loaded,
                splits.name,
                len(data.classes),
            )
        report = evaluate_model(loaded.model, data, splits, calibration=splits.val if temperature_scale else None)
        name = loaded.display_name
        report = {
            "checkpoint": str(loaded.path),
            "model": name,
            "dataset": splits.name,
            "split": split,
            **({"guessed": loaded.guessed} if loaded.guessed else {}),
            **report,
        }
        if run_dir is not None:
            write_evaluation(run_dir, report, data.classes, f"{name} on {splits.name} {split}")
        return report
    except BaseException:
        if run_dir is not None:
            run_dir.discard_if_unused()
        raise
    finally:
        if run_dir is not None:
            run_dir.close()


class HeadMismatchError(DataError):
    """A classifier's head does not fit the ``classes`` (a count) of ``dataset`` it is asked to score; the
    message names what does apply."""

    def __init__(self, loaded: Loaded, dataset: str, classes: int) -> None:
        self.outputs, self.dataset, self.classes = outputs_of(loaded), dataset, classes
        super().__init__(
            f"{loaded.path} has {self.outputs} outputs but {dataset} has {classes} classes: score its frozen "
            "features on these classes (--knn or --linear-probe), fine-tune it for them (vitlab train --init), "
            "or evaluate it on its own dataset (--dataset)"
        )


def outputs_of(loaded: Loaded) -> int | None:
    """The number of classes ``loaded``'s head predicts (``None`` when its config does not say)."""
    return getattr(loaded.model.config, "num_classes", None)


def head_fits(loaded: Loaded, classes: list[str]) -> bool:
    """Whether ``loaded``'s head predicts exactly as many classes as ``classes`` (one it does not record fits)."""
    outputs = outputs_of(loaded)
    return outputs is None or outputs == len(classes)


def write_evaluation(run_dir: RunDir, report: dict[str, Any], classes: list[str], title: str) -> None:
    """``metrics.json``, ``reliability.png`` and ``confusion.png`` of an evaluation ``report`` into ``run_dir``."""
    from ...engine.figures import plot_confusion, plot_reliability

    run_dir.write_json(EVALUATION, report)
    calibrated = report.get("calibrated", {}).get("reliability")
    plot_reliability(report["reliability"], run_dir.figure_path("reliability.png"), calibrated, title=title)
    plot_confusion(report["confusion"], classes, run_dir.figure_path("confusion.png"), title=title)
