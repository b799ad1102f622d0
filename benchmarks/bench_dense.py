"""Dense heads on `shapes` 64x64: linear per-patch vs decoder segmentation (mean IoU, by patch size),
and DETR-style detection (COCO mAP). Prints one JSON line per run.

    python benchmarks/bench_dense.py                       # the issue's figures (15 min budget per run)
    python benchmarks/bench_dense.py --minutes 3 --runs linear:8,decoder:8,detr:8

Every run uses :class:`DenseTrainConfig`'s and :class:`DenseConfig`'s defaults (the same backbone,
data, batch size and learning-rate schedule for every head) and one torch thread unless told
otherwise; the time limit stops training and the cosine schedule follows it.

Targets: decoder >= 0.85 mIoU and >= 5 points above linear at patch 8; DETR >= 0.7 mAP@.5.
"""

from __future__ import annotations

import argparse
import json
import platform

import torch

from vitlab.data import load_dense_dataset
from vitlab.data.shapes import SHAPES_COUNT
from vitlab.tasks import run as run_task
from vitlab.tasks.dense import DenseTrainConfig


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=float, default=15.0, help="training time limit per run")
    p.add_argument(
        "--epochs",
        type=int,
        default=200,
        help="schedule length, long enough that the time limit ends every run (the cosine then "
        "follows the elapsed time)",
    )
    p.add_argument("--runs", default="linear:8,decoder:8,detr:8", help="head:patch,... (linear|decoder|queries|detr)")
    p.add_argument("--count", type=int, default=SHAPES_COUNT, help="generated images (split 70/15/15)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    splits = load_dense_dataset("shapes", count=args.count, image_size=64, seed=0)
    for run in args.runs.split(","):
        head, patch = run.split(":")
        task = "detect" if head == "detr" else "segment"
        cfg = DenseTrainConfig(
            task=task,
            head=head,
            count=args.count,
            epochs=args.epochs,
            device=args.device,
            time_limit_s=args.minutes * 60,
            model={"patch_size": int(patch)},
        )
        r = run_task(cfg.task, cfg, splits)
        metric = {
            k: round(r.test[k], 4) for k in ("mean_iou", "pixel_acc", "boundary_acc", "map", "map50") if k in r.test
        }
        print(
            json.dumps(
                {
                    "bench": "dense",
                    "head": head,
                    "patch": int(patch),
                    "task": task,
                    **metric,
                    "epochs_done": len(r.history),
                    "train_s": round(r.seconds, 1),
                    "params": r.params,
                    "count": args.count,
                    "lr": cfg.lr,
                    "batch_size": cfg.batch_size,
                    "device": args.device,
                    "threads": torch.get_num_threads(),
                    "machine": platform.processor() or platform.machine(),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
