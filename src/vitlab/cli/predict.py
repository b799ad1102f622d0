"""``vitlab predict CKPT IMAGE...``: what the task that wrote the checkpoint predicts for images (a
classifier's classes, a dense model's overlay, ...), with each task's own options (``--top-k``, ...)."""

from __future__ import annotations

import argparse

from . import add_data_options, add_source_options
from .outputs import Output, add_output


def run(args: argparse.Namespace) -> int:
    """Hand the checkpoint to the task that wrote its kind (see :func:`~vitlab.cli.options.hand_over`)."""
    from .options import hand_over

    print(hand_over(args, "predict"))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from ..tasks.dense.spec import IMAGE_OUT
    from .options import add_request_options

    p = sub.add_parser(
        "predict",
        help="classify images, or overlay a dense model's masks or boxes",
        description="Predict with any checkpoint on image files (or every image in a folder), each read as the "
        "checkpoint's data config says (channels, size, mean/std): a classifier prints each image's top-k "
        "classes with probabilities; a segmenter or detector writes an overlay PNG of one image; each task's "
        "own options are below, named with the tasks that take them.",
    )
    p.add_argument("checkpoint", help="run folder, checkpoint file, timm / Hugging Face weights or folder, .keras")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files or folders of images")
    add_output(
        p,
        "--out",
        rule=Output("predictions (a classifier's CSV) or overlay (a dense model's image)", (".csv", *IMAGE_OUT)),
        help="where the result goes: a CSV of the predictions, or an overlay PNG",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the --out file if it exists")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    add_request_options(p, "predict")
    add_data_options(p, loader=False)
    add_source_options(p, compile=True)
    p.set_defaults(func=run)
