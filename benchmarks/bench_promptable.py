"""Promptable segmentation (SAM-style) on `shapes` 64x64: mean IoU per held-out object from one box
and from one point (the object's centre), the candidate with the highest predicted IoU scored.
Prints one JSON line.

    python benchmarks/bench_promptable.py --threads 1           # the issue's figure (15 min budget)
    python benchmarks/bench_promptable.py --minutes 3 --set patch_size=4

Training stops at the time limit (the cosine schedule follows it); :class:`PromptableTrainConfig`'s
and :class:`PromptableConfig`'s defaults otherwise. Goals: box >= 0.85, point >= 0.75 mean IoU.
"""

from __future__ import annotations

import argparse
import json
import platform

import torch

from vitlab.data.shapes import SHAPES_COUNT, load_dense_dataset
from vitlab.prompt import promptable_train_config, train_promptable


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=float, default=15.0, help="training time limit")
    p.add_argument("--epochs", type=int, default=200, help="schedule length; the time limit ends the run first")
    p.add_argument("--count", type=int, default=SHAPES_COUNT, help="generated images (split 70/15/15)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a PromptableTrainConfig or PromptableConfig field (JSON value), repeatable",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    sets = {k: json.loads(v) for k, v in (s.split("=", 1) for s in args.set)}
    config = promptable_train_config(
        {"count": args.count, "epochs": args.epochs, "device": args.device, "time_limit_s": args.minutes * 60, **sets}
    )
    splits = load_dense_dataset("shapes", count=config.count, image_size=config.image_size, seed=config.seed)
    r = train_promptable(config, splits)
    print(
        json.dumps(
            {
                "bench": "promptable",
                **{k: round(v, 4) for k, v in r.test.items()},
                "val_box_miou": round(r.val["box_miou"], 4),
                "val_point_miou": round(r.val["point_miou"], 4),
                "epochs_done": len(r.history),
                "train_s": round(r.seconds, 1),
                "params": r.params,
                "count": config.count,
                "lr": config.lr,
                "batch_size": config.batch_size,
                "model": config.model,
                "box_prob": config.box_prob,
                "device": args.device,
                "threads": torch.get_num_threads(),
                "machine": platform.processor() or platform.machine(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
