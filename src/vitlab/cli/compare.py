"""``vitlab compare``: a ViT against a CNN of the same size over rows x patches x augmentation x seeds."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..data import NORMALIZATIONS
from ..experiments.axes import CNN_CHOICES, VARIANT_CHOICES
from ..experiments.command import PITFALLS, run_command
from ..experiments.config import STUDY_PRESETS
from ..experiments.executors import EXECUTORS, usable_cores
from ..experiments.training import RECIPES
from . import parse_overrides, read_config_file
from .outputs import Output, add_output


def _rows(text: str) -> list[int | None]:
    """``300,full`` -> ``[300, None]``."""
    try:
        return [None if v.strip() == "full" else int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated image counts or 'full', e.g. 300,full; got {text!r}"
        ) from None


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 2,4; got {text!r}") from None


def _names(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


def _numbers(text: str) -> list[float | None]:
    """``1e-3,3e-3`` -> ``[0.001, 0.003]``; ``recipe`` stands for the recipe's own value (``None``)."""
    try:
        return [None if v.strip() == "recipe" else float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers or 'recipe', e.g. 1e-3,3e-3; got {text!r}"
        ) from None


def _say(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    """Run the study the options ask for (:func:`vitlab.experiments.command.run_command`) and print it."""

    def settings() -> tuple[dict[str, Any], dict[str, Any]]:
        return (read_config_file(args.config) if args.config else {}), parse_overrides(args.set)

    output = run_command(vars(args), settings, None if args.quiet else _say)
    print(output.table)
    for note in output.notes:
        print(note, file=sys.stderr)
    return 0


DESCRIPTION = (
    "Train a small ViT and a CNN of matching parameter count (within 15%) on the same data, seed, "
    "recipe and epochs, for every combination of training rows, ViT patch size and augmentation, repeated over "
    "seeds; write results.json, report.md (tables and conclusions derived from the numbers) and PNG plots into "
    "runs/NAME (or --out). Defaults: the digits data, rows 300,full, patches 2,4, augment none,recipe, 1 seed, "
    "40 epochs. "
    "Runs execute in parallel, one per usable core (--jobs), or as Ray tasks on a cluster (--executor ray). "
    "The textbook's study: --preset textbook (its Keras page's protocol on Fashion-MNIST: vit-seed against a "
    "textbook-size plain convnet and a size-matched CNN, rows 1000,4000, 15 epochs, recipe plain, pixels in "
    "[0, 1], 5 seeds; the report sets its published numbers beside vitlab's with a verdict per claim). "
    "ViT variants become further axes: --attention full,window,linear,tome (accuracy, seconds, forward speed and "
    "memory side by side), --pretrain none,mae,dino and --distill none,cnn (scratch vs pretrained vs distilled "
    "on the same labelled rows), --position abs,sincos,rowcol,rope,rel,rel-shared,none, --stem "
    "patch,conv,resnet (hybrid stems), --pool mean,token,max, the texts' pitfalls --block prenorm,postnorm, "
    "--norm layernorm,batchnorm, --mask none,causal, --stride patch,4 (overlapping windows), and the ViT's "
    "--lr and --warmup; combinations that cannot be "
    "built (e.g. the ResNet stem with patch 2) are skipped with the reason in the report. --robustness "
    "scores every model with patches masked (ViT tokens dropped) and centre-cropped."
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "compare",
        help="a ViT against a CNN of the same size (the textbook's mini-project)",
        description=DESCRIPTION,
    )
    _add_study_options(p)
    _add_variant_options(p)
    _add_probe_options(p)
    _add_run_options(p)
    p.set_defaults(func=run)


def _add_study_options(p: argparse.ArgumentParser) -> None:
    """The task, the preset, the data, the grid's shared axes and the models."""
    p.add_argument(
        "--task",
        default="classify",
        choices=("classify", "segment"),
        help="segment: compare dense heads (--head) by patch size (--patches) on shapes instead",
    )
    p.add_argument("--head", type=_names, help="with --task segment: heads to compare, default linear,decoder")
    p.add_argument(
        "--preset",
        choices=[*STUDY_PRESETS, PITFALLS],
        help="start from a named study (other options override its settings): textbook = the textbook "
        "page's Fashion-MNIST study with its published numbers and verdicts; pitfalls = every pitfall and "
        "claim of the texts measured, one small grid each, with a verdict decided by the seed spread (it takes "
        "--seeds, --dataset and how to run, nothing else); the study is named after it",
    )
    p.add_argument("--dataset", help="dataset name (see `vitlab data`); default digits")
    p.add_argument("--data-dir", help="folder holding the dataset's files")
    p.add_argument(
        "--image-size",
        type=int,
        help="the side images are read at: image files (folder, manifest, wds, hf; default 32) or a tensor dataset "
        "resized (default: its own size)",
    )
    p.add_argument("--rows", type=_rows, help="training-set sizes, comma-separated; 'full' = the whole pool")
    p.add_argument(
        "--patches", type=_ints, help="ViT patch sizes, comma-separated (each must divide the image, unless --pad)"
    )
    p.add_argument(
        "--pad",
        action="store_true",
        help="let patches that do not divide the image zero-pad it, bottom "
        "and right, to a multiple of the patch (e.g. patches 4,7,8,16 on 28x28); the report states it",
    )
    p.add_argument(
        "--augment",
        type=_names,
        help="augmentation, comma-separated: presets none, light, strong, or 'recipe' (the recipe's own "
        "augmentation, described in the report); default none,recipe",
    )
    p.add_argument("--seeds", type=int, help="repeat each cell with seeds 0..K-1 (mean ± std); default 1")
    p.add_argument("--epochs", type=int, help="epochs for every run; default 40")
    p.add_argument(
        "--minutes",
        type=float,
        help="with --task segment: training time limit per run (the learning-rate schedule follows it)",
    )
    p.add_argument("--recipe", choices=list(RECIPES), help="training settings shared by both models; default 'default'")
    p.add_argument("--vit", help="registered ViT (default per dataset: vit-digits, else vit-seed)")
    p.add_argument("--cnn", help="registered CNN family whose widths are matched (default cnn-digits / cnn-seed)")
    p.add_argument(
        "--cnns",
        type=_names,
        help=f"the CNNs each ViT meets, from {','.join(CNN_CHOICES)}: matched = the --cnn family sized "
        "to the ViT, textbook = a plain convnet at the textbook's size (~60k parameters); default matched",
    )
    p.add_argument(
        "--normalization",
        choices=NORMALIZATIONS,
        help="standardize (default: by the training rows' mean and std) or unit (pixels in [0, 1])",
    )


def _add_variant_options(p: argparse.ArgumentParser) -> None:
    """The ViT variant axes and the ViT's own training settings."""
    p.add_argument(
        "--attention",
        type=_names,
        help=f"ViT attention kinds to compare, from {','.join(VARIANT_CHOICES['attention'])}; 'tome' = the "
        "full model evaluated with token merging (no retraining); default full",
    )
    p.add_argument(
        "--pretrain",
        type=_names,
        help="ViT pretraining to compare: none (from scratch), mae, dino (without labels, then fine-tuned); "
        "default none",
    )
    p.add_argument(
        "--distill",
        type=_names,
        help="ViT teachers to compare: none, cnn (DeiT distillation from the cell's size-matched CNN); default none",
    )
    p.add_argument(
        "--position",
        type=_names,
        help=f"ViT positions to compare, from {','.join(VARIANT_CHOICES['position'])}: abs = the model's own "
        "absolute positions, sincos = fixed 2-D sinusoids, rowcol = learned row + column vectors, rope = rotary "
        "angles on queries and keys, rel = a relative position bias in every block (no absolute table), "
        "rel-shared = one bias for all blocks, none = no positions; default abs",
    )
    p.add_argument(
        "--stem",
        type=_names,
        help=f"ViT stems to compare, from {','.join(VARIANT_CHOICES['stem'])}: patch = the model's own patch "
        "embedding, conv = stride-2 conv stem (even patches), resnet = ResNetV2 stem (patches a multiple "
        "of 4); default patch",
    )
    p.add_argument(
        "--pool",
        type=_names,
        help=f"ViT pooling to compare, from {','.join(VARIANT_CHOICES['pool'])}: mean over the patch tokens, "
        "token = a class token read by the head, max; default mean",
    )
    p.add_argument(
        "--block",
        type=_names,
        help="ViT blocks to compare: prenorm (default), postnorm (normalise after the residual add)",
    )
    p.add_argument(
        "--norm",
        type=_names,
        help="norm inside the ViT's blocks: layernorm (default), batchnorm (over every token of the batch)",
    )
    p.add_argument("--mask", type=_names, help="ViT attention masks: none (default), causal (a language model's)")
    p.add_argument(
        "--stride",
        type=_names,
        help="ViT patch windows: patch (default: tiling), or pixels below the patch (overlapping: "
        "floor((H - P) / S) + 1 tokens per side), e.g. patch,4",
    )
    p.add_argument(
        "--tune",
        type=_names,
        help="ViT training modes to compare on a pretrained encoder (--init CKPT or --pretrain): full, head "
        "(freeze the vision encoder, train the head), last-K, lora, bitfit, prompt; default full",
    )
    p.add_argument(
        "--init",
        help="a checkpoint every ViT starts from (a run folder, file or hub id), e.g. an encoder trained on "
        "another dataset; fine-tuned with --layer-decay",
    )
    p.add_argument(
        "--lr",
        type=_numbers,
        help="ViT learning rates to compare (the CNN keeps the recipe's), e.g. 1e-3,1e-2; recipe = the recipe's",
    )
    p.add_argument(
        "--warmup", type=_numbers, help="ViT warmup epochs to compare (the CNN keeps the recipe's), e.g. 0,2"
    )


def _add_probe_options(p: argparse.ArgumentParser) -> None:
    """The probes scored after training, and the settings of pretraining and distillation."""
    p.add_argument(
        "--permute",
        action="store_true",
        help="after training, score every model with its patches shuffled (ViTs as trained and with their "
        "positions removed): agreement with the unshuffled predictions in the results",
    )
    p.add_argument(
        "--robustness",
        action="store_true",
        help="after training, score every model on the test split (validation without one) with 25%% and 50%% "
        "of its patches masked (a ViT drops their tokens; a CNN sees their pixels zeroed) and a 75%% centre "
        "crop resized back; a table in the report (shares: --set mask_fractions=[...] crop_fractions=[...])",
    )
    p.add_argument("--pretrain-epochs", type=int, help="epochs of pretraining for --pretrain mae/dino (default 40)")
    p.add_argument(
        "--pretrain-images",
        choices=("all", "train"),
        help="images to pretrain on, labels unused: the training pool (default, as vitlab pretrain) or all "
        "(validation and test images included: transductive)",
    )
    p.add_argument("--layer-decay", type=float, help="layer-wise LR decay when fine-tuning a pretrained ViT (0.75)")
    p.add_argument("--distill-kind", choices=("soft", "hard"), help="distillation loss (default soft)")
    p.add_argument("--distill-temperature", type=float, help="temperature of soft distillation (default 4)")


def _add_run_options(p: argparse.ArgumentParser) -> None:
    """Where and how the runs execute, the study's name and folder, and config files."""
    p.add_argument("--device", help="auto (default), cpu, cuda, ...")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        help=f"runs at once (default: the usable cores, here {usable_cores()}); 1 runs them one after "
        "the other in this process. The numbers do not depend on it",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads per run (default 1: these small models train fastest single-threaded "
        "beside other runs, and the thread count changes float rounding, so keeping it fixed keeps "
        "--jobs from changing the numbers); 0 keeps torch's default",
    )
    p.add_argument(
        "--executor",
        default="local",
        choices=EXECUTORS,
        help="local (default: processes on this machine) or ray (each run a Ray task; needs "
        "pip install 'vitlab[cluster]')",
    )
    p.add_argument(
        "--address",
        help="with --executor ray: the cluster to join, e.g. ray://head:10001 or auto; "
        "default a local Ray started for the study with --jobs CPUs",
    )
    p.add_argument(
        "--name", help="study name: the report goes to runs/NAME unless --out (default compare, or the preset's name)"
    )
    add_output(p, "--out", rule=Output("study folder"), help="the study's folder (default runs/NAME)")
    p.add_argument("--overwrite", action="store_true", help="replace the study already in the folder")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML or JSON study config (CompareConfig fields, e.g. a study's "
        "own settings); options given on the command line override it",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any study config field (CompareConfig), e.g. --set param_tolerance=0.2 or "
        "--set mask_fractions=[0.1,0.5]; over --config and the options above; repeatable",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines")
