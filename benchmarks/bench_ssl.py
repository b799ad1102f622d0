"""Pretraining and distillation at a small labelled budget: scratch vs MAE / DINO vs DeiT distillation.

    python benchmarks/bench_ssl.py --dataset digits                                  # minutes on a CPU
    python benchmarks/bench_ssl.py --dataset mnist --data-dir /work/shared/data/mnist-t10k --rows 1000

Protocol (issue #6). The dataset's splits are the trainer's (MNIST from its t10k file: the first
8,000 images are the training pool, of which the first ``--rows`` are labelled, the last 2,000
validate). Every run uses the same seed, labelled rows, recipe and epochs:

- ``none/none`` (scratch): the ViT trained on the labelled rows.
- ``mae`` (and ``dino`` with ``--dino``): the ViT pretrained without labels on every image of the
  dataset (``images="all"``; on MNIST the 10,000 images, which include the 2,000 validation images,
  their labels unused), then fine-tuned from it (``init``) with layer-wise LR decay.
- ``cnn``: the CNN teacher trained on the labelled rows; distill ``cnn``: the ViT with a DeiT
  distillation token trained on the labelled rows against it (``--distill`` soft at T = 4 by default).

The grid is :func:`vitlab.ssl.run_study`'s: pretrain ``none, mae`` (``, dino``) x distill ``none, cnn``.
Prints one JSON line per run (best validation accuracy, test accuracy where the dataset has a test
split, wall seconds with pretraining included) and a summary line: the gain of every run over the ViT
from scratch in accuracy points, and the process CPU seconds of the whole study.
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from vitlab.ssl import StudyConfig, run_study
from vitlab.train import TrainConfig

MODELS = {"digits": ("vit-digits", "cnn-digits"), "mnist": ("vit-seed", "cnn-seed")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="digits", choices=list(MODELS))
    p.add_argument("--data-dir")
    p.add_argument("--rows", type=int, default=1000, help="labelled training rows")
    p.add_argument("--epochs", type=int, default=30, help="supervised epochs (scratch, fine-tune, distil)")
    p.add_argument("--pretrain-epochs", type=int, default=30)
    p.add_argument("--mask-ratio", type=float, default=0.75)
    p.add_argument("--layer-decay", type=float, default=0.75)
    p.add_argument("--distill", default="soft", choices=("soft", "hard"))
    p.add_argument("--distill-temperature", type=float, default=4.0)
    p.add_argument("--dino", action="store_true", help="also pretrain with DINO (slow on a CPU)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (tiny models: 1 is fastest)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    vit, cnn = MODELS[args.dataset]
    config = StudyConfig(
        train=TrainConfig(model=vit, dataset=args.dataset, data_dir=args.data_dir, rows=args.rows, seed=args.seed,
                          epochs=args.epochs, device=args.device, distill_temperature=args.distill_temperature),
        cnn=cnn, pretrain=("none", "mae", "dino") if args.dino else ("none", "mae"), distill=("none", "cnn"),
        pretrain_epochs=args.pretrain_epochs, mask_ratio=args.mask_ratio, layer_decay=args.layer_decay,
        distill_kind=args.distill)
    env = {"dataset": args.dataset, "machine": platform.machine(), "torch": torch.__version__,
           "threads": torch.get_num_threads()}
    cpu = time.process_time()
    records = run_study(config, lambda r: print(json.dumps({**r, **env}), flush=True))
    scratch = next(r for r in records if r["run"] == "vit" and r["pretrain"] == r["distill"] == "none")
    gains = {f"{r['run']}/{r['pretrain']}/{r['distill']}": round(100 * (r["best_val_acc"] - scratch["best_val_acc"]), 2)
             for r in records if r is not scratch}
    print(json.dumps({"summary": True, "scratch_best_val_acc": scratch["best_val_acc"], "gain_points": gains,
                      "cpu_s": round(time.process_time() - cpu, 1), **env}))


if __name__ == "__main__":
    main()
