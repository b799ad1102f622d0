"""A small CLIP on captioned shapes 32x32: zero-shot accuracy on the shape-class task and retrieval
recall on held-out images, after a fixed amount of training. Prints one JSON line.

    python benchmarks/bench_clip.py --threads 1             # the issue's figure (<= 15 CPU minutes)
    python benchmarks/bench_clip.py --epochs 12             # a short run (about 3 CPU minutes)

The run trains :class:`CLIPTrainConfig`'s and the registered ``clip-shapes`` model's defaults for
``--epochs`` epochs (no time limit: the same work on any machine). The test split (15% of ``count``
generated scenes, never trained on) gives the figures, with the weights of the validated epoch of best
image->text recall@1; retrieval runs between the held-out images and their distinct captions (see
:func:`vitlab.tasks.clip.evaluate_clip`). ``cpu_s`` is the process's CPU time for the whole run (data,
training, validation, test), ``wall_s`` its wall time, ``load`` the 1-minute load average at the end
(CPU time stretches a little on a busy machine).

Targets: zero-shot accuracy >= 0.9 on the shape-class task and image->text recall@1 >= 0.8, in <= 15 CPU minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from vitlab.tasks import run
from vitlab.tasks.clip import CLIPTrainConfig


def main() -> None:
    defaults = CLIPTrainConfig()
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=defaults.epochs)
    p.add_argument("--count", type=int, default=defaults.count, help="generated captioned scenes (split 70/15/15)")
    p.add_argument("--batch-size", type=int, default=defaults.batch_size)
    p.add_argument("--lr", type=float, default=defaults.lr)
    p.add_argument("--negatives", type=int, default=defaults.negatives, help="hard-negative captions per image")
    p.add_argument("--eval-every", type=int, default=defaults.eval_every, help="validate every N epochs")
    p.add_argument("--seed", type=int, default=0)
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
        negatives=args.negatives,
        eval_every=args.eval_every,
        seed=args.seed,
        device=args.device,
    )
    r = run("clip", config)
    held_out = args.count - int(0.85 * args.count)
    print(
        json.dumps(
            {
                "bench": "clip",
                **{k: round(v, 4) for k, v in r.test.items()},
                "held_out": held_out,
                "best_epoch": next(h["epoch"] for h in r.history if h.get("val_i2t_r1") == r.val.get("i2t_r1")),
                "val_i2t_r1": {h["epoch"]: round(h["val_i2t_r1"], 4) for h in r.history if "val_i2t_r1" in h},
                "train_loss": round(r.history[-1]["train_loss"], 4),
                "epochs": len(r.history),
                "train_s": round(r.seconds, 1),
                "wall_s": round(time.perf_counter() - start, 1),
                "cpu_s": round(time.process_time() - cpu, 1),
                "load": round(os.getloadavg()[0], 2),
                "params": r.params,
                "count": args.count,
                "batch_size": args.batch_size,
                "lr": args.lr,
                "negatives": args.negatives,
                "device": args.device,
                "threads": torch.get_num_threads(),
                "machine": platform.processor() or platform.machine(),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
