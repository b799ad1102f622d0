"""Training on real data: vitlab's vit-seed against timm's VisionTransformer in vitlab's own loop.

    python benchmarks/bench_train.py --threads 1                  # CPU, MNIST t10k protocol, 4,000 rows
    python benchmarks/bench_train.py --device cuda --repeats 3

Protocol: the first 8,000 images of MNIST's t10k file are the training pool (the first
``--rows`` of it train), the last 2,000 validate. The ``plain`` recipe (Adam 1e-3, batch 64, constant
LR, no augmentation) trains vitlab's ``vit-seed`` and timm's ``VisionTransformer`` with the same
architecture (img 28, patch 7, in_chans 1, dim 64, depth 2, heads 4, mlp_ratio 2, average pooling, no
class token, no fc_norm) through the same :func:`vitlab.tasks.train`, alternately, ``--repeats``
times. Then the ``small-data`` recipe trains ``vit-seed-small-data`` once.

Prints one JSON line per run and a summary line: wall seconds each (best of the repeats), the ratio
vitlab/timm (<1: vitlab faster), best validation accuracy each (mean of the repeats), and the
small-data recipe's accuracy and seconds.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

import timm
import torch
from torch import nn

import vitlab
from vitlab.data import load_dataset
from vitlab.models import register_builder, register_model
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig

DEFAULT_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "mnist-t10k"


@dataclass
class TimmSeedConfig:
    """timm's twin of ``vit-seed``; the fields are the ones the trainer sets from the data."""

    img_size: int | tuple[int, int] = 28
    in_chans: int = 1
    num_classes: int = 10


def build_timm(config: TimmSeedConfig) -> nn.Module:
    return timm.models.vision_transformer.VisionTransformer(
        img_size=config.img_size,
        patch_size=7,
        in_chans=config.in_chans,
        num_classes=config.num_classes,
        embed_dim=64,
        depth=2,
        num_heads=4,
        mlp_ratio=2.0,
        global_pool="avg",
        class_token=False,
        fc_norm=False,
    )


def run_once(model: str, recipe: str, splits, args: argparse.Namespace) -> dict:
    config = TrainConfig.from_recipe(
        recipe, model=model, dataset="mnist", rows=args.rows, epochs=args.epochs, seed=args.seed, device=args.device
    )
    start = time.perf_counter()
    result = run("classify", config, splits)
    seconds = time.perf_counter() - start
    record = {
        "model": model,
        "recipe": recipe,
        "rows": args.rows,
        "epochs": args.epochs,
        "seed": args.seed,
        "params": result.params,
        "seconds": round(seconds, 2),
        "best_val_acc": result.best_val_acc,
        "best_epoch": result.best_epoch,
        "final_val_acc": result.history[-1]["val_acc"],
        "train_acc": result.train_acc,
    }
    print(json.dumps(record), flush=True)
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=str(DEFAULT_DATA), help="folder with MNIST's t10k IDX files")
    p.add_argument("--rows", type=int, default=4000)
    p.add_argument("--epochs", type=int, default=15)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=2, help="alternating vitlab/timm rounds")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--skip-small-data", action="store_true", help="only the vitlab/timm comparison")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    register_builder(TimmSeedConfig, build_timm)
    register_model("timm-vit-seed", TimmSeedConfig(), "timm's VisionTransformer shaped as vit-seed")
    splits = load_dataset("mnist", args.data_dir, rows=args.rows, seed=args.seed)

    runs = {"vitlab": [], "timm": []}
    for _ in range(args.repeats):
        runs["vitlab"].append(run_once("vit-seed", "plain", splits, args))
        runs["timm"].append(run_once("timm-vit-seed", "plain", splits, args))
    seconds = {k: min(r["seconds"] for r in v) for k, v in runs.items()}
    summary = {
        "benchmark": "train",
        "machine": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "vitlab": vitlab.__version__,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "rows": args.rows,
        "epochs": args.epochs,
        "repeats": args.repeats,
        "plain_seconds": seconds,
        "ratio_vitlab_over_timm": round(seconds["vitlab"] / seconds["timm"], 3),
        "plain_best_val_acc": {k: round(mean(r["best_val_acc"] for r in v), 4) for k, v in runs.items()},
    }
    if not args.skip_small_data:
        small = run_once("vit-seed-small-data", "small-data", splits, args)
        summary["small_data"] = {k: small[k] for k in ("params", "seconds", "best_val_acc", "best_epoch")}
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
