"""``vitlab train``: train a model on a dataset (DDP under ``torchrun -m vitlab train``)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import ConfigError
from . import (
    add_common,
    add_data_options,
    apply_threads,
    data_options,
    merge_fields,
    parse_overrides,
    read_config_file,
    refuse_owned,
)

RECIPE_NAMES = ("default", "plain", "small-data", "finetune")

# argparse destination -> TrainConfig field, for the options that map one to one
FIELDS = (
    "model",
    "dataset",
    "data_dir",
    "rows",
    "epochs",
    "batch_size",
    "lr",
    "seed",
    "augment",
    "device",
    "init",
    "layer_decay",
    "teacher",
    "distill",
    "distill_alpha",
    "distill_temperature",
    "compile",
)


def build_config(args: argparse.Namespace):  # -> TrainConfig
    """The run's config: the run's saved config (``--resume``) or a ``--config`` file, else the recipe;
    then the options given. ``--set KEY=VALUE`` sets a TrainConfig field when KEY is one, an
    augmentation field as ``augment.KEY`` (e.g. ``augment.color_jitter=0.4``), a data field as
    ``data.KEY`` (e.g. ``data.crop_pct=0.9``), a model config field otherwise. ``--init`` without
    ``--model`` trains the init checkpoint's own architecture."""
    from ..engine.config import field_names
    from ..tasks.classify import TrainConfig

    options = task_options(args, FIELDS, TrainConfig.CLI_OWNED)
    own = set(field_names(TrainConfig))
    sets = parse_overrides(args.set)
    augment_sets = {k.removeprefix("augment."): options.pop(k) for k in sets if k.startswith("augment.")}
    data_sets = {k.removeprefix("data."): options.pop(k) for k in sets if k.startswith("data.")}
    model_sets = {k: options.pop(k) for k in sets if k not in own and not k.startswith(("augment.", "data."))}
    merge_fields(options, "model_overrides", model_sets, "model config")
    merge_fields(options, "augment_overrides", augment_sets, "augment")
    data = options.get("data") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"data must be a mapping of data options, got {data!r:.40}: e.g. --set data.image_size=224")
    options["data"] = {**data, **data_sets, **data_options(args)}
    if args.init is not None and args.model is None and "model" not in options:
        options["model"] = "init"
    if args.ema is not None:
        options["ema_decay"] = args.ema
    if args.no_amp:
        options["amp"] = False
    if args.resume or args.config:
        config = TrainConfig.from_dict(options)
    else:
        config = TrainConfig.from_recipe(args.recipe, **options)
    return on_purpose(config, args, FIELDS)


def on_purpose(config: Any, args: argparse.Namespace, fields: tuple[str, ...]) -> Any:
    """``config`` with ``resume_sets``: on ``--resume``, the fields of ``config.RESUME_SETTABLE`` that an
    option or ``--set`` gives, which the resumed run applies (``--resume --set lr=1e-4``) instead of refusing."""
    if args.resume:
        given = {name for name in fields if getattr(args, name, None) is not None} | set(parse_overrides(args.set))
        config.allow_on_resume(given)
    return config


DENSE_FIELDS = ("dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "device", "head", "compile")


def task_options(args: argparse.Namespace, fields: tuple[str, ...], owned: dict[str, str]) -> dict[str, Any]:
    """A task's flat options: the run's saved config (``--resume``) or ``--config FILE``, then the
    options given (``fields``), then ``--set``, then the run-folder flags. A ``--set`` of a field the
    command line owns (``owned``: ``out_dir`` is ``--out``) is refused."""
    from ..runs import RunDir
    from ..runs.layout import CONFIG

    refuse_owned(parse_overrides(args.set), owned)
    if args.resume and args.out is None:
        raise ConfigError("--resume needs the run folder: --out DIR")
    base = (
        read_config_file(RunDir(args.out) / CONFIG)
        if args.resume
        else read_config_file(args.config)
        if args.config
        else {}
    )
    base = {k: v for k, v in base.items() if k not in ("resume", "overwrite", "out_dir")}
    given = {name: getattr(args, name) for name in fields if getattr(args, name) is not None}
    run = {"out_dir": args.out, "resume": args.resume, "overwrite": args.overwrite}
    return {**base, **given, **parse_overrides(args.set), **run}


def reporter_for(args: argparse.Namespace) -> Any:
    """A progress bar on the main process (none with ``--quiet`` or on other ranks), after ``--threads``."""
    from ..engine import TqdmReporter

    apply_threads(args.threads)
    return TqdmReporter(disable=True if args.quiet else None) if is_main() else None


def is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def run_dense(args: argparse.Namespace) -> int:
    """``--task segment|detect``: train a dense head (see ``vitlab.tasks.dense``). ``--set KEY=VALUE`` sets a
    DenseTrainConfig field (e.g. ``count``, ``image_size``) or a DenseConfig field (e.g. ``patch_size``)."""
    from ..tasks.dense import DenseTrainConfig, dense_train_config, train_dense

    options = task_options(args, DENSE_FIELDS, DenseTrainConfig.CLI_OWNED)
    config = on_purpose(dense_train_config({**options, "task": args.task}), args, DENSE_FIELDS)
    reporter = reporter_for(args)
    result = train_dense(config, reporter=reporter)
    if is_main():
        test = result.test
        scores = (
            f"pixel acc {test['pixel_acc']:.4f}, mean IoU {test['mean_iou']:.4f}"
            if config.task == "segment"
            else f"mAP@[.5:.95] {test['map']:.4f}, mAP@.5 {test['map50']:.4f}"
        )
        print(
            f"{config.head} {config.task} on {config.dataset}: {result.params:,} parameters, "
            f"{result.seconds:.1f}s, test {scores} (final model)"
        )
        if config.out_dir is not None:
            print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


PROMPTABLE_FIELDS = ("dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "device", "compile")


def run_promptable(args: argparse.Namespace) -> int:
    """``--task promptable``: SAM-style promptable segmentation (see ``vitlab.tasks.promptable``). ``--set KEY=VALUE``
    sets a PromptableTrainConfig field (e.g. ``count``, ``box_prob``) or a PromptableConfig field."""
    from ..errors import ConfigError
    from ..tasks.promptable import PromptableTrainConfig, promptable_train_config, train_promptable

    if args.head is not None:
        raise ConfigError("--head picks a dense head: promptable segmentation has its own mask decoder")
    options = task_options(args, PROMPTABLE_FIELDS, PromptableTrainConfig.CLI_OWNED)
    config = on_purpose(promptable_train_config(options), args, PROMPTABLE_FIELDS)
    reporter = reporter_for(args)
    result = train_promptable(config, reporter=reporter)
    if is_main():
        test = result.test
        print(
            f"promptable on {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, test mean IoU "
            f"from one box {test['box_miou']:.4f}, from one point {test['point_miou']:.4f} (final model)"
        )
        if config.out_dir is not None:
            print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


CLIP_FIELDS = ("model", "dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "device", "compile")


def run_clip(args: argparse.Namespace) -> int:
    """``--task clip``: a small CLIP on captioned shapes (see ``vitlab.tasks.clip``). ``--set KEY=VALUE`` sets a
    CLIPTrainConfig field (e.g. ``count``, ``image_size``) or a CLIPConfig field (e.g. ``embed_dim``,
    ``vision={"depth": 2}``)."""
    from ..errors import ConfigError
    from ..tasks.clip import CLIPTrainConfig, clip_train_config, train_clip

    if args.head is not None:
        raise ConfigError("--head picks a dense head: a CLIP model has none")
    config = on_purpose(
        clip_train_config(task_options(args, CLIP_FIELDS, CLIPTrainConfig.CLI_OWNED)), args, CLIP_FIELDS
    )
    reporter = reporter_for(args)
    result = train_clip(config, reporter=reporter)
    if is_main():
        test = result.test
        print(
            f"{config.model} on captioned {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, "
            f"test recall@1 image->text {test['i2t_r1']:.4f}, text->image {test['t2i_r1']:.4f}, zero-shot "
            f"shape accuracy {test['zero_shot_acc']:.4f} (best epoch's weights)"
        )
        if config.out_dir is not None:
            print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.task == "promptable":
        return run_promptable(args)
    if args.task == "clip":
        return run_clip(args)
    if args.task != "classify":
        return run_dense(args)
    if args.head is not None:
        raise ValueError("--head picks a dense head: use it with --task segment or --task detect")
    from ..tasks import train

    config = build_config(args)
    result = train(config, reporter=reporter_for(args))
    if is_main():
        line = (
            f"{config.model} on {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, "
            f"train acc {result.train_acc:.4f}, best val acc {result.best_val_acc:.4f} (epoch {result.best_epoch})"
        )
        if result.test is not None:
            line += (
                f", test acc {result.test['acc']:.4f} (loss {result.test['loss']:.4f}, ece "
                f"{result.test['ece']:.4f}; best epoch's weights)"
            )
        print(line)
        if config.out_dir is not None:
            print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a model on a dataset",
        description="Train a model. Defaults: vit-digits on digits with the 'default' recipe. "
        "Under `torchrun --nproc_per_node=N -m vitlab train ...` runs DDP (--batch-size per process).",
    )
    p.add_argument(
        "--task",
        default="classify",
        choices=("classify", "segment", "detect", "promptable", "clip"),
        help="classify (default), or a dense, promptable or clip task on e.g. --dataset shapes",
    )
    p.add_argument(
        "--head",
        choices=("linear", "decoder", "queries", "detr"),
        help="dense head: linear|decoder|queries for segment (default linear), detr for detect; "
        "--set KEY=VALUE sets dense options (patch_size, embed_dim, count, image_size, ...)",
    )
    p.add_argument("--model", help="registered model name (see `vitlab models`); default vit-digits")
    p.add_argument("--dataset", help="dataset name (see `vitlab data`); default digits")
    p.add_argument("--data-dir", help="folder holding the dataset's files")
    p.add_argument("--rows", type=int, help="keep only the first N training images")
    add_data_options(p)
    p.add_argument("--recipe", default="default", choices=RECIPE_NAMES, help="named training settings")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML or JSON run config (e.g. a run's own config.json); options given on the command line override it",
    )
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int, help="images per step per process")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--augment", help="augmentation preset: none, light, strong")
    p.add_argument("--ema", type=float, metavar="DECAY", help="keep an EMA of the weights (e.g. 0.999)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any run config field (e.g. --set weight_decay=0.1), augmentation field as augment.KEY "
        "(e.g. --set augment.color_jitter=0.4), data field as data.KEY (e.g. --set data.crop_pct=0.9) "
        "or model config field (e.g. --set drop_path_rate=0.1); repeatable",
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    p.add_argument(
        "--init",
        metavar="CKPT",
        help="start from the matching weights of any model source (a run, "
        "`vitlab pretrain`, timm or Hugging Face weights, .keras); learned positions are resampled to "
        "the data's image size, and heads a timm file does not record are the trained model's",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        default=None,
        help="run the training forward through torch.compile (slow to start, faster per step)",
    )
    p.add_argument("--layer-decay", type=float, help="layer-wise LR decay when fine-tuning (e.g. 0.75)")
    p.add_argument("--teacher", metavar="CKPT", help="distil from this checkpoint (a vitlab CNN or ViT)")
    p.add_argument("--distill", choices=("soft", "hard"), help="distillation kind (DeiT token and head)")
    p.add_argument("--distill-alpha", type=float, help="weight of the distillation term (default 0.5)")
    p.add_argument("--distill-temperature", type=float, help="soft distillation temperature T (default 4)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    add_common(p, out="run folder for checkpoints and metrics (default: write nothing)")
    p.set_defaults(func=run)
