"""A small CLIP on captioned shapes 32x32: zero-shot accuracy on the shape-class task and retrieval
recall on held-out images. Prints one JSON line.

    python benchmarks/bench_clip.py --threads 1            # the issue's figure (15 min budget)
    python benchmarks/bench_clip.py --minutes 3 --count 6000

The run uses :class:`CLIPTrainConfig`'s and the registered ``clip-shapes`` model's defaults unless told
otherwise; the time limit stops training and the cosine schedule follows it. The test split (15% of
``count`` generated scenes, never trained on) gives the figures, with the weights of the epoch of best
validation image->text recall@1. ``cpu_s`` is the process's CPU time for the whole run.

Targets: zero-shot accuracy >= 0.9 on the shape-class task and image->text recall@1 >= 0.8, in <= 15 CPU minutes.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from vitlab.data.captions import load_caption_splits
from vitlab.multimodal import CLIPTrainConfig, train_clip


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--minutes", type=float, default=14.0, help="training time limit (data and evaluation come on top)")
    p.add_argument("--epochs", type=int, default=16, help="schedule length; the time limit may end it first")
    p.add_argument("--count", type=int, default=20_000, help="generated captioned scenes (split 70/15/15)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    start, cpu = time.perf_counter(), time.process_time()
    config = CLIPTrainConfig(
        count=args.count,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr,
        warmup_epochs=0.3,
        device=args.device,
        time_limit_s=args.minutes * 60,
    )
    splits = load_caption_splits(config.count, config.image_size, config.seed, config.plain)
    r = train_clip(config, splits)
    print(
        json.dumps(
            {
                "bench": "clip",
                **{k: round(v, 4) for k, v in r.test.items()},
                "held_out": len(splits.test),
                "shape_task_images": int((splits.test.shape_labels() >= 0).sum()),
                "best_epoch": next(
                    h["epoch"] for h in r.history if "val_i2t_r1" in h and h["val_i2t_r1"] == r.val.get("i2t_r1")
                ),
                "epochs_done": len(r.history),
                "train_s": round(r.seconds, 1),
                "total_s": round(time.perf_counter() - start, 1),
                "cpu_s": round(time.process_time() - cpu, 1),
                "params": r.params,
                "count": args.count,
                "lr": args.lr,
                "batch_size": args.batch_size,
                "device": args.device,
                "threads": torch.get_num_threads(),
                "machine": platform.processor() or platform.machine(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
