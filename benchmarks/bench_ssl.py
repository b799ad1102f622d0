"""Pretraining and distillation at a small labelled budget: scratch vs MAE / DINO vs DeiT distillation.

    python benchmarks/bench_ssl.py --dataset digits                                  # minutes on a CPU
    python benchmarks/bench_ssl.py --dataset mnist --data-dir ../shared/data/mnist-t10k --rows 1000
    python benchmarks/bench_ssl.py --dataset mnist --data-dir ../shared/data/mnist-t10k --rows 1000 --dino

Protocol, as ``vitlab compare --pretrain none,mae[,dino] --distill none,cnn`` with one
labelled budget. The dataset's splits are the trainer's (MNIST from its t10k file: the first 8,000
images are the training pool, of which ``--rows`` are labelled, the last 2,000 validate). Every run
uses the same seed, labelled rows, recipe and epochs:

- pretrain ``none``: the ViT trained from scratch on the labelled rows.
- ``mae`` (and ``dino`` with ``--dino``): the ViT pretrained without labels on every image of the
  dataset (on MNIST the 10,000 images, which include the 2,000 validation images, their labels
  unused), then fine-tuned from it with layer-wise LR decay.
- distill ``cnn``: the ViT with a DeiT distillation token trained on the labelled rows against the
  cell's CNN (size-matched to the ViT, trained on the same rows), soft at T = 4 by default.

Prints one JSON line per run (best validation accuracy, test accuracy where the dataset has a test
split, wall seconds with pretraining included) and a summary line: the gain of every ViT over the
ViT from scratch in accuracy points, and the process CPU seconds of the whole study. The full
report (tables, conclusions, figures) goes to ``runs/bench_ssl_<dataset>``.
"""

from __future__ import annotations

import argparse
import json
import platform

import torch

from vitlab.experiments import CompareConfig, run_compare

MODELS = {"digits": ("vit-digits", "cnn-digits", 2), "mnist": ("vit-seed", "cnn-seed", 7)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", default="digits", choices=list(MODELS))
    p.add_argument("--data-dir")
    p.add_argument("--rows", type=int, default=1000, help="labelled training rows")
    p.add_argument("--epochs", type=int, default=30, help="supervised epochs (scratch, fine-tune, distil)")
    p.add_argument("--pretrain-epochs", type=int, default=30)
    p.add_argument("--layer-decay", type=float, default=0.75)
    p.add_argument("--distill", default="soft", choices=("soft", "hard"))
    p.add_argument("--distill-temperature", type=float, default=4.0)
    p.add_argument("--dino", action="store_true", help="also pretrain with DINO")
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch threads (tiny models: 1 is fastest)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default="runs", help="the report goes to OUT/bench_ssl_DATASET")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    vit, cnn, patch = MODELS[args.dataset]
    name = f"bench_ssl_{args.dataset}"
    config = CompareConfig(
        name=name,
        pretrain_images="all",  # the recorded figures' protocol (transductive: see the report's caveat)
        dataset=args.dataset,
        data_dir=args.data_dir,
        rows=[args.rows],
        patches=[patch],
        augment=["recipe"],
        seeds=args.seeds,
        epochs=args.epochs,
        vit=vit,
        cnn=cnn,
        device=args.device,
        pretrain=["none", "mae", "dino"] if args.dino else ["none", "mae"],
        distill=["none", "cnn"],
        pretrain_epochs=args.pretrain_epochs,
        layer_decay=args.layer_decay,
        distill_kind=args.distill,
        distill_temperature=args.distill_temperature,
        out_dir=f"{args.out}/{name}",
    )
    env = {
        "dataset": args.dataset,
        "machine": platform.machine(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }

    def progress(index: int, total: int, run, record) -> None:
        if record is not None:
            print(
                json.dumps(
                    {
                        "run": record.kind,
                        "seed": run.train["seed"],
                        "pretrain": run.axes.get("pretrain"),
                        "distill": run.axes.get("distill"),
                        "model": record.model,
                        "params": record.params,
                        "rows": record.train_rows,
                        "best_val_acc": record.best_val_acc,
                        "test_acc": record.test_acc,
                        "seconds": round(record.seconds, 1),
                        **env,
                    }
                ),
                flush=True,
            )

    result = run_compare(config, progress)
    vits = [r for r in result.records.values() if r.kind == "vit"]

    def mean_acc(pretrain: str, distill: str) -> float:
        accs = [r.best_val_acc for r in vits if (r.axes["pretrain"], r.axes["distill"]) == (pretrain, distill)]
        return sum(accs) / len(accs)

    scratch = mean_acc("none", "none")
    gains = {
        f"{pre}/{dis}": round(100 * (mean_acc(pre, dis) - scratch), 2)
        for pre in config.pretrain
        for dis in config.distill
        if (pre, dis) != ("none", "none")
    }
    cnn_acc = [r.best_val_acc for r in result.records.values() if r.kind == "cnn"]
    print(
        json.dumps(
            {
                "summary": True,
                "seeds": args.seeds,
                "scratch_best_val_acc": scratch,
                "cnn_best_val_acc": sum(cnn_acc) / len(cnn_acc),
                "gain_points": gains,
                "cpu_s": round(result.cpu_seconds, 1),
                "wall_s": round(result.seconds, 1),
                "report": str(result.files["report"]),
                **env,
            }
        )
    )


if __name__ == "__main__":
    main()
