"""``vitlab predict CKPT IMAGE...``: classify images (a table, ``--json``, or a CSV for a folder), or
overlay a dense model's masks or boxes on one image."""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from pathlib import Path


def run_dense(args: argparse.Namespace) -> int:
    """A ``segmenter`` / ``detector`` checkpoint: its masks or boxes drawn over the image."""
    from ..dense import predict_file

    if len(args.images) != 1:
        raise ValueError(f"a dense model draws on one image at a time, got {len(args.images)}")
    image = args.images[0]
    out = args.out or str(Path(image).with_suffix("")) + "_overlay.png"
    print(f"wrote {predict_file(args.checkpoint, image, out, min_score=args.min_score, device=args.device)}")
    return 0


def run(args: argparse.Namespace) -> int:
    from ..device import resolve_device
    from ..runs import load_checkpoint
    from ..tasks import classify_files

    loaded = load_checkpoint(args.checkpoint, resolve_device(args.device))
    if loaded.kind in ("segmenter", "detector"):
        return run_dense(args)
    for name, why in loaded.guessed.items():
        print(f"vitlab predict: guessed {name} = {why}", file=sys.stderr)
    predictions = classify_files(loaded, args.images, top_k=args.top_k)
    folder = any(Path(p).is_dir() for p in args.images)
    if args.json:
        print(json.dumps([{"image": str(p.path), "top": [{"class": c, "probability": v} for c, v in p.top]}
                          for p in predictions], indent=2))
    elif folder or args.out:
        table = io.StringIO()
        writer = csv.writer(table, lineterminator="\n")
        writer.writerow(["image", *[f"{kind}{i + 1}" for i in range(len(predictions[0].top))
                                    for kind in ("class", "probability")]])
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
    p = sub.add_parser("predict", help="classify images, or overlay a dense model's masks or boxes",
                       description="Classify image files (or every image in a folder) with a classifier checkpoint of "
                       "any source: each image is read as the checkpoint's data config says (channels, size, "
                       "mean/std) and its top-k classes printed with probabilities. A segmenter or detector "
                       "(`vitlab train --task segment|detect`) writes an overlay PNG of one image instead.")
    p.add_argument("checkpoint", help="run folder, checkpoint file, timm / Hugging Face weights or folder, .keras")
    p.add_argument("images", nargs="+", metavar="IMAGE", help="image files or folders of images")
    p.add_argument("--top-k", type=int, default=5, help="classes to show per image (default 5)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", help="a CSV of the predictions (classifier), or the overlay PNG (dense; default: "
                   "IMAGE_overlay.png)")
    p.add_argument("--min-score", type=float, default=0.5, help="dense: boxes below this score are not drawn")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    p.set_defaults(func=run)
