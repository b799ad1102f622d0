"""``vitlab pretrain mae|dino``: self-supervised pretraining of a ViT, saved for ``vitlab train --init``."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from . import add_common, apply_threads, merge_fields, parse_overrides, read_config_file, refuse_owned

METHODS = ("mae", "dino")
IMAGE_SETS = ("train", "all")

# argparse destination -> PretrainConfig field, for the options that map one to one
FIELDS = (
    "model",
    "dataset",
    "data_dir",
    "rows",
    "images",
    "epochs",
    "batch_size",
    "lr",
    "seed",
    "device",
    "local_crops",
)
MAE_FLAGS = ("mask_ratio", "norm_pix_loss")
RUN_ONLY = ("resume", "overwrite", "out_dir")


def split_sets(sets: dict[str, Any], own: set[str]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``--set`` items as PretrainConfig fields, MAE fields (``mae.KEY``) and model fields (the rest)."""
    config = {k: v for k, v in sets.items() if k in own}
    mae = {k.removeprefix("mae."): v for k, v in sets.items() if k.startswith("mae.")}
    model = {k: v for k, v in sets.items() if k not in own and not k.startswith("mae.")}
    return config, mae, model


def build_config(args: argparse.Namespace):  # -> PretrainConfig
    """The run's config: a ``--config`` file (or, with ``--resume``, the run's saved config), else the
    defaults; then the options given. ``--set KEY=VALUE`` sets a PretrainConfig field when KEY is
    one, an MAE field as ``mae.KEY``, a model config field otherwise."""
    from ..engine.config import field_names
    from ..errors import ConfigError
    from ..runs import RunDir
    from ..runs.layout import CONFIG
    from ..tasks.ssl import PretrainConfig

    given = {name: getattr(args, name) for name in FIELDS if getattr(args, name) is not None}
    refuse_owned(parse_overrides(args.set), PretrainConfig.CLI_OWNED)
    sets, mae_sets, model_sets = split_sets(parse_overrides(args.set), set(field_names(PretrainConfig)))
    given.update(sets, method=args.method, out_dir=args.out, overwrite=args.overwrite)
    mae_sets.update({k: getattr(args, k) for k in MAE_FLAGS if getattr(args, k) is not None})
    if args.resume:
        if args.out is None:
            raise ConfigError("--resume needs the run folder: --out DIR")
        base = read_config_file(RunDir(args.out) / CONFIG)
        given.update(resume=True, overwrite=False)
    elif args.config:
        base = {k: v for k, v in read_config_file(args.config).items() if k not in RUN_ONLY}
    else:
        base = {}
    merged = {**base, **given}
    merge_fields(merged, "mae", mae_sets, "MAEConfig")
    merge_fields(merged, "model_overrides", model_sets, "model config")
    config = PretrainConfig.from_dict(merged)
    if args.resume:  # what the resume applies on purpose (--set lr=...), see RunConfig.RESUME_SETTABLE
        said = {name for name in FIELDS if getattr(args, name) is not None} | set(parse_overrides(args.set))
        config.allow_on_resume(said)
    return config


def run(args: argparse.Namespace) -> int:
    from ..engine import TqdmReporter
    from ..tasks.ssl import pretrain

    config = build_config(args)
    apply_threads(args.threads)
    main = int(os.environ.get("RANK", "0")) == 0
    reporter = TqdmReporter(disable=True if args.quiet else None) if main else None
    result = pretrain(config, reporter=reporter)
    if not main:
        return 0
    last = result.history[-1] if result.history else {}
    monitors = "".join(
        f", {k.removeprefix('train_')} {last[k]:.4f}"
        for k in ("train_teacher_entropy", "train_teacher_student_kl")
        if k in last
    )
    loss = f", final loss {last['train_loss']:.4f}" if last else ""
    print(
        f"{config.method} pretraining of {config.model} on {config.dataset}: {len(result.history)} epochs, "
        f"{result.seconds:.1f}s{loss}{monitors}"
    )
    if result.checkpoint is not None:
        print(f"encoder: {result.checkpoint} (fine-tune with `vitlab train --init {config.out_dir}`)", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="self-supervised pretraining (masked autoencoder or DINO)",
        description="Pretrain a ViT without labels; --out writes a run folder whose encoder "
        "checkpoint serves `vitlab train --init` and `vitlab evaluate --linear-probe/--knn`.",
    )
    p.add_argument("method", choices=METHODS)
    p.add_argument("--model", help="registered ViT name; default vit-digits")
    p.add_argument("--dataset", help="dataset name; default digits")
    p.add_argument("--data-dir", help="folder holding the dataset's files")
    p.add_argument("--rows", type=int, help="keep only the first N training images")
    p.add_argument(
        "--images",
        choices=IMAGE_SETS,
        help="pretrain on the train split (default) or on every split's images (labels unused)",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="a YAML or JSON pretraining config (e.g. a run's own "
        "config.json); options given on the command line override it",
    )
    p.add_argument("--epochs", type=int, help="default 50")
    p.add_argument("--batch-size", type=int, help="images per step per process; default 128")
    p.add_argument("--lr", type=float, help="peak learning rate; default 1.5e-3")
    p.add_argument("--mask-ratio", type=float, help="MAE: fraction of patches hidden, in (0, 1); default 0.75")
    p.add_argument("--norm-pix-loss", action="store_true", default=None, help="MAE: per-patch normalised targets")
    p.add_argument("--local-crops", type=int, help="DINO: number of local crops (default 4)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any pretraining config field (e.g. --set teacher_momentum=0.99), MAE field as mae.KEY "
        "(e.g. --set mae.decoder_depth=1) or model config field (e.g. --set depth=4); repeatable",
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last epoch")
    add_common(p, out="run folder for the encoder checkpoint, metrics and figures (default: write nothing)")
    p.set_defaults(func=run)
