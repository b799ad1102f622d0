"""The report's sections in words: how the pixels reached the models and where the runs ran, the
padding, the ViT variants studied, the skipped combinations, diverged runs, robustness and the
attention figures."""

from __future__ import annotations

import platform
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from .. import __version__
from ..data import AugmentConfig
from .aggregates import Aggregate
from .axes import VARIANTS
from .conclusions import describe_cell
from .plan import skipped_summary
from .records import CompareResult
from .tables import padded, robustness_table


def normalization_words(normalization: str) -> str:
    """How the pixels reached the models, in words."""
    return (
        "pixels in [0, 1] as loaded (no standardisation), as the textbook feeds them"
        if normalization == "unit"
        else "pixels standardised by the training rows' per-channel mean and standard deviation"
    )


def environment(execution: dict[str, Any]) -> dict[str, Any]:
    """What a study's ``results.json`` records of where it ran: vitlab, torch and Python versions, torch threads,
    CUDA, and how the runs were executed (``execution``)."""
    return {
        "vitlab": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "cuda": torch.cuda.is_available(),
        **execution,
    }


def execution_words(execution: dict[str, Any]) -> str:
    """``2 processes at once, 1 torch thread each`` / ``Ray at local, 1 CPU each``."""
    threads = execution.get("threads_per_run")
    each = (
        f"{threads} torch thread{'s' if threads != 1 else ''} each"
        if isinstance(threads, int)
        else "torch's default threads each"
    )
    if execution.get("executor") == "ray":
        return f"Ray tasks on {execution['address']}, {each}"
    jobs = execution.get("jobs", 1)
    return f"{jobs} process{'es' if jobs > 1 else ''} at once, {each}" if jobs > 1 else f"one run at a time, {each}"


def recipe_augment(augment: str | AugmentConfig) -> str:
    """A recipe's augmentation in words: ``preset light``, ``erasing=0.25``, or ``none``."""
    if isinstance(augment, str):
        return f"preset {augment}"
    default = AugmentConfig()
    changed = [
        f"{f.name}={getattr(augment, f.name)}"
        for f in fields(AugmentConfig)
        if getattr(augment, f.name) != getattr(default, f.name)
    ]
    return ", ".join(changed) or "none"


def padding_lines(result: CompareResult) -> list[str]:
    """A sentence on the patch sizes that zero-pad the image (empty when none does)."""
    _, height, width = result.data["image_shape"]
    padding = [p for p in result.config.patch_sizes if result.config.pad and (height % p or width % p)]
    if not padding:
        return []
    sizes = ", ".join(f"patch {p}: {padded(height, p)}x{padded(width, p)}" for p in padding)
    return [
        f"Patch{'es' if len(padding) > 1 else ''} {', '.join(map(str, padding))} "
        f"do{'es' if len(padding) == 1 else ''} not divide the {height}x{width} images: the ViT zero-pads its "
        f"(normalised) input, bottom and right, to a multiple of the patch ({sizes}).",
        "",
    ]


def variant_lines(result: CompareResult) -> list[str]:
    """The report's paragraph on the ViT variants studied (empty when none is)."""
    cfg = result.config
    studied = {axis.name: axis.values for axis in result.plan.axes if axis.name in VARIANTS}
    if not studied:
        return []
    lines = ["## ViT variants", ""]
    if "attention" in studied:
        lines.append(
            f"- **Attention** ({', '.join(studied['attention'])}): each kind trains the same ViT with its "
            "attention replaced (`window`: windows of half the patch grid's side, shifted in every other "
            "block, mean pooling; `lowrank`: keys and values projected to half the tokens; `latent`: a "
            "quarter of the "
            "tokens as latents; `sparse`: a band of one grid row, every grid-row-th token and the class "
            "token). `tome` is the full-attention ViT, trained once, evaluated with token merging "
            "of half its patch tokens over the blocks (front-loaded schedule), without retraining; its "
            "accuracy is that of the trained model (the checkpoint chosen by validation) with merging, and "
            "Agreement is the share of validation images on which it predicts what the unmerged model "
            "predicts."
        )
    if "pretrain" in studied:
        images = (
            "every image of the dataset (validation and test images included, their labels unused)"
            if cfg.pretrain_images == "all"
            else "the training pool (labels unused)"
        )
        lines.append(
            f"- **Pretraining** ({', '.join(studied['pretrain'])}): the ViT is pretrained without labels for "
            f"{cfg.pretrain_epochs} epoch{'s' if cfg.pretrain_epochs > 1 else ''} on {images}, once per "
            f"seed and ViT shape, then fine-tuned on the "
            f"cell's labelled rows with layer-wise learning-rate decay {cfg.layer_decay:g}. Its Seconds "
            "include "
            "the pretraining."
        )
    if "distill" in studied:
        kind = (
            f"soft (KL at temperature {cfg.distill_temperature:g}, weight {cfg.distill_alpha:g})"
            if cfg.distill_kind == "soft"
            else "hard (the teacher's argmax as a second label)"
        )
        lines.append(
            f"- **Distillation** ({', '.join(studied['distill'])}): with `cnn` the ViT gets a DeiT "
            f"distillation token and head and learns from the cell's own size-matched CNN, {kind}; at "
            "inference it averages its two heads."
        )
    if "position" in studied:
        lines.append(
            f"- **Positions** ({', '.join(studied['position'])}): `abs` keeps the model's absolute "
            "position table added to the patch tokens; `rel` replaces it with a learned relative position "
            "bias on the attention scores in every block (one entry per grid offset and head, timm's "
            "`VisionTransformerRelPos`), `rel-shared` with one such table for all blocks; `none` has no "
            "positions at all."
        )
    if "stem" in studied:
        lines.append(
            f"- **Stems** ({', '.join(studied['stem'])}): `patch` is the model's own patchify embedding (one "
            "linear map per patch); `conv` runs stride-2 3x3 convolutions with BatchNorm and ReLU (as many "
            "as the factors of 2 in the patch, Xiao et al. 2021) and `resnet` timm's ResNetV2 stem (7x7 "
            "convolution of stride 2 and max-pooling: a reduction of 4) before a projection of the rest of "
            "the patch; the token grid is the same."
        )
    if "pool" in studied:
        lines.append(
            f"- **Pooling** ({', '.join(studied['pool'])}): `token` prepends a class token and classifies "
            "from it alone; `mean` / `max` classify from the mean / maximum over the patch tokens."
        )
    if any(name in studied for name in ("position", "stem", "pool")):
        lines.append(
            "- Each cell's CNN is matched to that cell's ViT, so a stem, a bias table or a class token that "
            "changes the ViT's parameter count may change the CNN's widths: the Parameters column gives "
            "both."
        )
    return lines + [""]


def skipped_lines(result: CompareResult) -> list[str]:
    """The report's list of the combinations the study skipped (empty when none was)."""
    lines = skipped_summary(result.plan.skipped)
    return ["## Skipped combinations", "", *(f"- {line}." for line in lines), ""] if lines else []


def diverged_lines(result: CompareResult) -> list[str]:
    """The report's list of runs whose loss stopped being finite (empty when none did)."""
    runs = [r for r in result.records.values() if r.diverged]
    if not runs:
        return []
    return [
        "## Diverged runs",
        "",
        f"{len(runs)} run{'s' if len(runs) > 1 else ''} stopped when the loss was no longer finite; each is "
        "counted in the tables with a constant guess's accuracy (the validation split's most frequent class) "
        "and no ECE:",
        "",
        *(
            f"- {r.label}, {describe_cell(r.axes, r.train_rows)[3:]}, seed {r.axes.get('seed', 0)} ({r.seconds:.1f} s)."
            for r in runs
        ),
        "",
    ]


def robustness_lines(result: CompareResult, aggregates: Sequence[Aggregate]) -> list[str]:
    """The report's section on masked patches and centre crops (empty when not measured)."""
    table = robustness_table(aggregates)
    if not table:
        return []
    data = result.data
    split = "test" if data["test"] is not None else "validation"
    images = data["test"] if data["test"] is not None else data["val"]
    return [
        "## Robustness: masked patches and centre crops",
        "",
        f"Every model (the checkpoint chosen by validation) scored on the {split} split ({images:,} images). "
        "*Clean*: as is. A random share f of each image's patches is removed, the same patches for every "
        "model on that patch grid (one generator, seed 0), in two ways. *Drop f*: the ViT's blocks run "
        "without those patch tokens, as MAE's encoder does, the kept ones keeping their positions (`–` for a "
        "CNN, and for a ViT that cannot run on a subset of its tokens: a relative position bias; window, "
        "low-rank or sparse attention; token merging). *Zero f*: the patches' pixels set to zero in the "
        "normalised input (the training mean), for every model; a CNN is masked on the patch grid of each "
        "ViT it meets (the Patch grid column). *Crop c*: the central c of each side, resized back to the full "
        f"image (bilinear). Mean ± standard deviation over {result.config.seeds} seed"
        f"{'s' if result.config.seeds > 1 else ''}.",
        "",
        *table,
        "",
    ]


def attention_lines(result: CompareResult) -> list[str]:
    """The report's section of per-head attention figures for the best ViT (empty without them)."""
    if "reason" in result.attention:
        return [
            "## What the best ViT attends to",
            "",
            result.attention["reason"][0].upper() + result.attention["reason"][1:] + ".",
            "",
        ]
    if not result.attention.get("files"):
        return []
    lines = [
        "## What the best ViT attends to",
        "",
        f"Per-head attention of **{result.attention['label']}** (the ViT run with the best validation "
        "accuracy, `" + result.attention["run"] + "`) for its most confident correct and wrong validation "
        "predictions, every layer. Titles give each head's largest weight on one key (max) and its spread "
        "(max − min), the statistic the textbook's table quotes (uniform: 1/N on every key, max − min 0). "
        "Compare the wrong rows with the right ones: attention that looks normal on a confident mistake is no "
        "explanation of it (`vitlab explain --audit` tests the maps).",
        "",
    ]
    return lines + [f"![{Path(f).stem.replace('_', ' ')}]({f})" for f in result.attention["files"]] + [""]
