"""``vitlab predict CKPT IMAGE``: an overlay PNG of a dense model's masks or boxes."""
from __future__ import annotations

import argparse
from pathlib import Path


def run_dense(args: argparse.Namespace) -> int:
    """A ``segmenter`` / ``detector`` checkpoint: its masks or boxes drawn over the image."""
    from ..dense import predict_file

    out = args.out or str(Path(args.image).with_suffix("")) + "_overlay.png"
    print(f"wrote {predict_file(args.checkpoint, args.image, out, min_score=args.min_score, device=args.device)}")
    return 0


def run(args: argparse.Namespace) -> int:
    return run_dense(args)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="overlay a dense model's masks or boxes on an image",
                       description="Run a checkpoint from `vitlab train --task segment|detect --out DIR` on one "
                       "image (resized to the model's size) and write an overlay PNG.")
    p.add_argument("checkpoint", help="run folder or model.safetensors of a dense model")
    p.add_argument("image", help="an image file (PNG, JPEG, ...)")
    p.add_argument("--out", help="overlay PNG path (default: IMAGE_overlay.png)")
    p.add_argument("--min-score", type=float, default=0.5, help="boxes below this score are not drawn")
    p.add_argument("--device", default="auto", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    p.set_defaults(func=run)
