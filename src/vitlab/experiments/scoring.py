"""A trained run's :class:`~vitlab.experiments.records.RunRecord`: its accuracies, and what is scored
after training (token merging for ``tome``, robustness, the eval-mode training accuracy, shuffled
patches); and the record of a run that diverged."""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from ..data import DataSplits, ImageDataset
from ..explain.input_probes import permutation_probe
from ..explain.robustness import Probes, robustness
from ..models import VisionTransformer
from .records import RunPlan, RunRecord
from .training import RunResult, classification_report, predict_logits
from .variants import with_tome

# Training rows the eval-mode reading of training accuracy scores (the first ones).
TRAIN_EVAL_ROWS = 10_000


def record_run(
    run: RunPlan,
    result: RunResult,
    splits: DataSplits,
    seconds: float | None = None,
    probes: Probes | None = None,
    *,
    train_eval: bool = False,
    permute: bool = False,
) -> RunRecord:
    """A :class:`RunRecord` from a plan and its :class:`~vitlab.tasks.RunResult` on ``splits``
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
            return predict_logits(net, data.images.to(device), splits).cpu()

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
        fields["robustness"] = robustness(scored, held_out, splits, run.mask_patches, probes)
    if train_eval:
        fields["train_eval_acc"] = eval_mode_train_accuracy(scored, splits)
    if permute:
        fields["permutation"] = permuted_rows(scored, splits, run)
    return RunRecord(
        **planned_fields(run, splits),
        params=result.params,
        final_train_acc=result.train_acc,
        gap=result.train_acc - fields["best_val_acc"],
        seconds=result.seconds if seconds is None else seconds,
        curves=curves,
        cost=result.cost or None,
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
    logits = predict_logits(model, images.to(device), splits).cpu()
    return float((logits.argmax(-1) == labels).float().mean())


def permuted_rows(model: nn.Module, splits: DataSplits, run: RunPlan) -> list[dict[str, Any]]:
    """:func:`~vitlab.explain.input_probes.permutation_probe` rows for ``model`` on up to :data:`PERMUTE_IMAGES`
    held-out images (test, else validation), patches of the ViT's own size (a CNN's: the patch of the ViTs it
    meets, the first)."""
    held_out = splits.in_memory("test" if splits.test is not None else "val", "the permutation probe")
    device = next(model.parameters()).device
    images = splits.normalize(held_out.images[:PERMUTE_IMAGES].to(device))
    labels = held_out.labels[:PERMUTE_IMAGES].to(device)
    return permutation_probe(model.eval(), images, labels, run.mask_patches[0])["rows"]


def planned_fields(run: RunPlan, splits: DataSplits) -> dict[str, Any]:
    """A record's fields the plan fixes before training: key, kind, model, CNN widths, axes, training rows."""
    return {
        "key": run.key,
        "kind": run.kind,
        "model": run.model,
        "widths": list(run.overrides["widths"]) if run.kind == "cnn" else None,
        "axes": run.axes,
        "train_rows": len(splits.train),
    }


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
        **planned_fields(run, splits),
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
