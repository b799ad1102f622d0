"""Promptable segmentation (SAM-style) on `shapes` 64x64: mean IoU per held-out object from one box
and from one point (the object's centre), the candidate with the highest predicted IoU scored.
Prints one JSON line.

    python benchmarks/bench_promptable.py --threads 1           # the issue's figure (<= 15 CPU minutes)
    python benchmarks/bench_promptable.py --epochs 4 --set prompts_per_image=2

A fixed amount of work (``--epochs`` over ``--count`` images, no time limit), so the figures do not
depend on the machine's load; ``cpu_s`` is this process's CPU time for training and evaluation
(``time.process_time``), ``wall_s`` the elapsed time, ``load`` the 1-minute load average at the end.
:class:`PromptableTrainConfig`'s and :class:`PromptableConfig`'s defaults otherwise. Goals: box >= 0.85,
point >= 0.75 mean IoU, in <= 15 CPU minutes on one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch

from vitlab.data import load_dense_dataset
from vitlab.data.shapes import SHAPES_COUNT
from vitlab.tasks import run
from vitlab.tasks.promptable import PromptableTrainConfig

EPOCHS = 16  # about 10 CPU minutes on one thread of a 2020s x86 core


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=EPOCHS, help="epochs over the training split")
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
    config = PromptableTrainConfig.from_options(
        {"count": args.count, "epochs": args.epochs, "device": args.device, **sets}
    )
    splits = load_dense_dataset("shapes", count=config.count, image_size=config.image_size, seed=config.seed)
    cpu, wall = time.process_time(), time.perf_counter()
    r = run("promptable", config, splits)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(
        json.dumps(
            {
                "bench": "promptable",
                **{k: round(v, 4) for k, v in r.test.items()},
                "val_box_miou": round(r.val["box_miou"], 4),
                "val_point_miou": round(r.val["point_miou"], 4),
                "epochs": len(r.history),
                "cpu_s": round(cpu, 1),
                "wall_s": round(wall, 1),
                "load": round(os.getloadavg()[0], 2),
                "params": r.params,
                "count": config.count,
                "lr": config.lr,
                "batch_size": config.batch_size,
                "prompts_per_image": config.prompts_per_image,
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
