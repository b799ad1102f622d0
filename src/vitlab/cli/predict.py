"""``vitlab predict CKPT IMAGE...``: classify images (a table, ``--json``, or a CSV for a folder), or
overlay a dense model's masks or boxes on one image."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

from . import add_data_options, add_source_options, load_source, source_data_options


def run_dense(args: argparse.Namespace) -> int:
    """A ``segmenter`` / ``detector`` checkpoint: its masks or boxes drawn over the image."""
    from ..tasks.dense import predict_file

    if len(args.images) != 1:
        raise ValueError(f"a dense model draws on one image at a time, got {len(args.images)}")
    image = args.images[0]
    out = args.out or str(Path(image).with_suffix("")) + "_overlay.png"
    print(f"wrote {predict_file(args.checkpoint, image, out, min_score=args.min_score, device=args.device)}")
    return 0


def coordinates(text: str, n: int, option: str) -> list[float]:
    """``"X,Y"`` -> ``[X, Y]`` (``n`` comma-separated pixel coordinates of ``option``)."""
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) != n:
        raise ValueError(f"{option} takes {n} comma-separated pixel coordinates, got {text!r}")
    return values


def run_promptable(args: argparse.Namespace) -> int:
    """A ``promptable`` checkpoint: the best mask for ``--point`` (repeatable) and / or ``--box`` over the image."""
    from ..tasks.promptable import predict_file

    if len(args.images) != 1:
        raise ValueError(f"a promptable model segments one image at a time, got {len(args.images)}")
    if not args.point and args.box is None:
        raise ValueError("a promptable model needs a prompt: --point X,Y (repeatable) or --box X0,Y0,X1,Y1")
    points = [coordinates(p, 2, "--point") for p in args.point] or None
    box = coordinates(args.box, 4, "--box") if args.box is not None else None
    image = args.images[0]
    out = args.out or str(Path(image).with_suffix("")) + "_overlay.png"
    path, iou = predict_file(args.checkpoint, image, out, points=points, box=box, device=args.device)
    print(f"wrote {path} (predicted IoU {iou:.3f})")
    return 0


def run_clip(args: argparse.Namespace, loaded) -> int:  # loaded: vitlab.runs.Loaded
    """A ``clip`` checkpoint: each image's zero-shot class probabilities and, with ``--captions``, which
    caption fits."""
    from ..data import read_image
    from ..tasks.classify.predict import image_files
    from ..tasks.clip import classify, rank_captions

    size = loaded.data.image_size[0]
    classes = loaded.data.classes
    for path in image_files(args.images):
        image = read_image(path, channels=3, size=size).to(next(loaded.model.parameters()).device)
        probs = classify(loaded.model, image[None], classes)[0].tolist()
        ranked = sorted(zip(classes, probs), key=lambda pair: -pair[1])[: args.top_k]
        print(f"{path}  zero-shot: " + "  ".join(f"{c} {v:.3f}" for c, v in ranked))
        for caption, prob in rank_captions(loaded.model, image, args.captions) if args.captions else ():
            print(f"  {prob:.3f}  {caption}")
    return 0


def run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..tasks import classify_files

    if args.top_k < 1:  # every kind that ranks classes (a classifier, CLIP's zero-shot labels)
        raise ConfigError(f"--top-k must be at least 1, got {args.top_k}")
    loaded = load_source(args, "predict")
    if loaded.kind in ("segmenter", "detector"):
        return run_dense(args)
    if loaded.kind == "promptable":
        return run_promptable(args)
    if loaded.kind == "clip":
        return run_clip(args, loaded)
    predictions = classify_files(loaded, args.images, top_k=args.top_k, options=source_data_options(args))
    folder = any(Path(p).is_dir() for p in args.images)
    if args.json:
        print(
            json.dumps(
                [
                    {"image": str(p.path), "top": [{"class": c, "probability": v} for c, v in p.top]}
                    for p in predictions
                ],
                indent=2,
            )
        )
    elif folder or args.out:
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(
            ["image", *[f"{kind}{i + 1}" for i in range(len(predictions[0].top)) for kind in ("class", "probability")]]
        )
        for p in predictions:
            writer.writerow([str(p.path), *[x for c, v in p.top for x in (c, f"{v:.6f}")]])
        if args.out:
            from ..runs import atomic_write

            atomic_write(args.out, table.getvalue().encode())
            print(f"wrote {args.out} ({len(predictions)} images)")
        else:
            print(table.getvalue(), end="")
    else:
        width = max(len(str(p.path)) for p in predictions)
        for p in predictions:
            print(f"{str(p.path):<{width}}  " + "  ".join(f"{c} {v:.3f}" for c, v in p.top))
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
