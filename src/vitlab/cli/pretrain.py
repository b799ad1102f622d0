"""``vitlab pretrain mae|dino``: self-supervised pretraining of a ViT, saved for ``vitlab train --init``."""

from __future__ import annotations

import argparse

from .train import add_run_options, train

METHODS = ("mae", "dino")
MAE_FLAGS = ("mask_ratio", "norm_pix_loss")


def run(args: argparse.Namespace) -> int:
    """``--mask-ratio`` and ``--norm-pix-loss`` are MAE fields: ``--set mae.KEY`` with a flag of their own."""
    args.task = "pretrain"
    args.set = [
        *args.set,
        *(f"mae.{k}={str(getattr(args, k)).lower()}" for k in MAE_FLAGS if getattr(args, k) is not None),
    ]
    args.recipe = None
    return train(args, {"method": args.method})


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "pretrain",
        help="self-supervised pretraining (masked autoencoder or DINO)",
        description="Pretrain a ViT without labels; --out writes a run folder whose encoder "
        "checkpoint serves `vitlab train --init` and `vitlab evaluate --linear-probe/--knn`.",
    )
    p.add_argument("method", choices=METHODS)
    p.add_argument("--mask-ratio", type=float, help="MAE: fraction of patches hidden, in (0, 1); default 0.75")
    p.add_argument("--norm-pix-loss", action="store_true", default=None, help="MAE: per-patch normalised targets")
    add_run_options(
        p, "pretrain", out="run folder for the encoder checkpoint, metrics and figures (default: write nothing)"
    )
    p.set_defaults(func=run)
