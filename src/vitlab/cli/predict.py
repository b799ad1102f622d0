"""``vitlab predict CKPT IMAGE...``: classify images (a table, ``--json``, or a CSV for a folder), or
overlay a dense model's masks or boxes on one image."""

from __future__ import annotations

import argparse

from . import add_data_options, add_source_options, from_args, load_source, source_data_options


def run(args: argparse.Namespace) -> int:
    """Hand the checkpoint to the task that wrote its kind (see :class:`vitlab.tasks.TaskSpec`)."""
    from ..errors import ConfigError
    from ..tasks import PredictRequest, task_for_kind

    if args.top_k < 1:  # every kind that ranks classes (a classifier, CLIP's zero-shot labels)
        raise ConfigError(f"--top-k must be at least 1, got {args.top_k}")
    loaded = load_source(args, "predict")
    spec = task_for_kind(loaded.kind, "predict")
    request = from_args(PredictRequest, args, options=source_data_options(args))
    print(spec.predict(loaded, request))  # type: ignore[misc]  # task_for_kind checked it has one
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "predict",
        help="classify images, or overlay a dense model's masks or boxes",
        description="Classify image files (or every image in a folder) with a classifier checkpoint of "
        "any source: each image is read as the checkpoint's data config says (channels, size, "
        "mean/std) and its top-k classes printed with probabilities. A segmenter or detector "
        "(`vitlab train --task segment|detect`) writes an overlay PNG of one image instead.",
    )
    p.add_argument("checkpoint", help="run folder, checkpoint file, timm / Hugging Face weights or folder, .keras")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files or folders of images")
    p.add_argument("--top-k", type=int, default=5, help="classes to show per image (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument(
        "--out", help="a CSV of the predictions (classifier), or the overlay PNG (dense; default: IMAGE_overlay.png)"
    )
    p.add_argument("--min-score", type=float, default=0.5, help="dense: boxes below this score are not drawn")
    p.add_argument(
        "--point",
        action="append",
        default=[],
        metavar="X,Y",
        help="promptable: a foreground point in the image's pixels (repeatable)",
    )
    p.add_argument("--box", metavar="X0,Y0,X1,Y1", help="promptable: a box prompt in the image's pixels")
    p.add_argument(
        "--captions",
        nargs="+",
        metavar="TEXT",
        help="clip: rank these captions for each image "
        "(best fit first), e.g. --captions 'a red circle' 'a blue square'",
    )
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    add_data_options(p, loader=False)
    add_source_options(p, compile=True)
    p.set_defaults(func=run)
