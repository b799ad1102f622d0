"""``vitlab evaluate CKPT``: accuracy, NLL, ECE, per-class accuracy, figures, temperature scaling."""

from __future__ import annotations

import argparse

from . import add_data_options, add_source_options
from .outputs import Output, add_output

SPLITS = ("test", "val", "train")


def run(args: argparse.Namespace) -> int:
    """Hand the checkpoint to the task that wrote its kind (see :func:`~vitlab.cli.options.hand_over`)."""
    from .options import hand_over

    print(hand_over(args, "evaluate"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from .options import add_request_options

    p = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint: accuracy, NLL, calibration, confusion",
        description="Evaluate a checkpoint written by `vitlab train --out` (a run folder, a "
        "checkpoint folder or a model.safetensors) on a split of its dataset. A classifier whose head is for "
        "other classes than the dataset's (a hub model on your photos) is scored by k-NN on its frozen features.",
    )
    p.add_argument(
        "checkpoint",
        help="run folder (uses best/), checkpoint folder or file, timm / Hugging Face weights or folder, .keras",
    )
    p.add_argument("--dataset", help="dataset name (default: the one it was trained on)")
    p.add_argument("--data-dir", help="folder holding the dataset's files (default: the training run's)")
    p.add_argument("--split", default="test", choices=SPLITS)
    add_output(p, "--out", rule=Output("report folder"), help="folder for metrics.json, reliability.png, confusion.png")
    p.add_argument("--overwrite", action="store_true", help="replace the evaluation already in --out")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    add_request_options(p, "evaluate")
    add_data_options(p)
    add_source_options(p, compile=True)
    p.set_defaults(func=run)
