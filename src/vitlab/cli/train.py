"""``vitlab train``: train a model on a dataset (DDP under ``torchrun -m vitlab train``)."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch

from ..train import RECIPES, TqdmReporter, TrainConfig, train
from . import parse_overrides


# argparse destination -> TrainConfig field, for the options that map one to one
FIELDS = ("model", "dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "augment", "device",
          "init", "layer_decay", "teacher", "distill", "distill_alpha", "distill_temperature")


def build_config(args: argparse.Namespace) -> TrainConfig:
    """The run's config: the recipe (or, with ``--resume``, the run's saved config), then the options given."""
    given = {name: getattr(args, name) for name in FIELDS if getattr(args, name) is not None}
    if args.set:
        given["model_overrides"] = parse_overrides(args.set)
    if args.ema is not None:
        given["ema_decay"] = args.ema
    if args.no_amp:
        given["amp"] = False
    given["out_dir"] = args.out
    if args.resume:
        if args.out is None:
            raise ValueError("--resume needs the run folder: --out DIR")
        config_file = Path(args.out) / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"nothing to resume: {config_file} does not exist")
        saved = json.loads(config_file.read_text())
        return TrainConfig.from_dict({**saved, **given, "resume": True})
    return TrainConfig.from_recipe(args.recipe, **given)


DENSE_FIELDS = ("dataset", "data_dir", "rows", "epochs", "batch_size", "lr", "seed", "device")


def run_dense(args: argparse.Namespace) -> int:
    """``--task segment|detect``: train a dense head (see ``vitlab.dense``)."""
    from ..dense import dense_train_config, train_dense

    given = {name: getattr(args, name) for name in DENSE_FIELDS if getattr(args, name) is not None}
    head = args.head or ("detr" if args.task == "detect" else "linear")
    config = dense_train_config({"task": args.task, "head": head, "device": "cpu", **given,
                                 "out_dir": args.out, **parse_overrides(args.set)})
    progress = None if args.quiet else (lambda epoch, loss: print(f"epoch {epoch + 1}/{config.epochs} "
                                                                  f"loss {loss:.4f}", file=sys.stderr))
    result = train_dense(config, progress=progress)
    test = result.test
    scores = (f"pixel acc {test['pixel_acc']:.4f}, mean IoU {test['mean_iou']:.4f}" if config.task == "segment"
              else f"mAP@[.5:.95] {test['map']:.4f}, mAP@.5 {test['map50']:.4f}")
    print(f"{config.head} {config.task} on {config.dataset}: {result.params:,} parameters, "
          f"{result.seconds:.1f}s, test {scores}")
    if config.out_dir is not None:
        print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.task != "classify":
        return run_dense(args)
    if args.head is not None:
        raise ValueError("--head picks a dense head: use it with --task segment or --task detect")
    config = build_config(args)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    main = int(os.environ.get("RANK", "0")) == 0
    reporter = TqdmReporter(disable=True if args.quiet else None) if main else None
    result = train(config, reporter=reporter)
    if main:
        line = (f"{config.model} on {config.dataset}: {result.params:,} parameters, {result.seconds:.1f}s, "
                f"train acc {result.train_acc:.4f}, best val acc {result.best_val_acc:.4f} (epoch {result.best_epoch})")
        if result.test is not None:
            line += f", test acc {result.test['acc']:.4f} (loss {result.test['loss']:.4f}, ece {result.test['ece']:.4f})"
        print(line)
        if config.out_dir is not None:
            print(f"run folder: {config.out_dir}", file=sys.stderr)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model on a dataset",
                       description="Train a model. Defaults: vit-digits on digits with the 'default' recipe. "
                       "Under `torchrun --nproc_per_node=N -m vitlab train ...` runs DDP (--batch-size per process).")
    p.add_argument("--task", default="classify", choices=("classify", "segment", "detect"),
                   help="classify (default), or a dense task on e.g. --dataset shapes")
    p.add_argument("--head", choices=("linear", "decoder", "queries", "detr"),
                   help="dense head: linear|decoder|queries for segment (default linear), detr for detect; "
                   "--set KEY=VALUE sets dense options (patch_size, embed_dim, count, image_size, ...)")
    p.add_argument("--model", help="registered model name (see `vitlab models`); default vit-digits")
    p.add_argument("--dataset", help="dataset name (see `vitlab data`); default digits")
    p.add_argument("--data-dir", help="folder holding the dataset's files")
    p.add_argument("--rows", type=int, help="keep only the first N training images")
    p.add_argument("--recipe", default="default", choices=list(RECIPES), help="named training settings")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int, help="images per step per process")
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--augment", help="augmentation preset: none, light, strong")
    p.add_argument("--ema", type=float, metavar="DECAY", help="keep an EMA of the weights (e.g. 0.999)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="model config override, repeatable (e.g. --set drop_path_rate=0.1)")
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="auto (default), cpu, cuda, cuda:1, ...")
    p.add_argument("--no-amp", action="store_true", help="no bf16 autocast on CUDA")
    p.add_argument("--threads", type=int, help="CPU threads per process (1 is fastest for small models on a "
                   "busy machine)")
    p.add_argument("--init", metavar="CKPT", help="start from a checkpoint's matching weights (e.g. `vitlab pretrain`)")
    p.add_argument("--layer-decay", type=float, help="layer-wise LR decay when fine-tuning (e.g. 0.75)")
    p.add_argument("--teacher", metavar="CKPT", help="distil from this checkpoint (a vitlab CNN or ViT)")
    p.add_argument("--distill", choices=("soft", "hard"), help="distillation kind (DeiT token and head)")
    p.add_argument("--distill-alpha", type=float, help="weight of the distillation term (default 0.5)")
    p.add_argument("--distill-temperature", type=float, help="soft distillation temperature T (default 1)")
    p.add_argument("--out", help="run folder for checkpoints and metrics (default: write nothing)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)
