"""``vitlab evaluate CKPT``: accuracy, NLL, ECE, per-class accuracy, figures, temperature scaling."""

from __future__ import annotations

import argparse

from . import add_data_options, add_source_options, load_source, source_data_options

SPLITS = ("test", "val", "train")


def run_dense(args: argparse.Namespace) -> int:
    """A ``segmenter`` / ``detector`` checkpoint (``vitlab train --task segment|detect``): pixel
    accuracy and mean IoU, or COCO mAP."""
    from ..tasks.dense import evaluate_dense_checkpoint

    report = evaluate_dense_checkpoint(
        args.checkpoint,
        split=args.split,
        dataset=args.dataset,
        data_dir=args.data_dir,
        device=args.device,
        out_dir=args.out,
        overwrite=args.overwrite,
    )
    head = f"{report['head']} {report['task']} on {report['dataset']} {report['split']} ({report['n']} images):"
    if report["task"] == "segment":
        print(f"{head} pixel accuracy {report['pixel_acc']:.4f}  mean IoU {report['mean_iou']:.4f}")
    else:
        print(f"{head} mAP@[.5:.95] {report['map']:.4f}  mAP@.5 {report['map50']:.4f}")
    if args.out:
        print(f"wrote {args.out}/metrics.json")
    return 0


def run(args: argparse.Namespace) -> int:
    loaded = load_source(args, "evaluate")
    if loaded.kind in ("segmenter", "detector"):
        return run_dense(args)
    if args.linear_probe or args.knn:
        from ..tasks.ssl import probe_checkpoint

        for method, wanted in (("linear", args.linear_probe), ("knn", args.knn)):
            if wanted:
                probe = probe_checkpoint(
                    args.checkpoint,
                    method,
                    dataset=args.dataset,
                    data_dir=args.data_dir,
                    split=args.split,
                    rows=args.rows,
                    k=args.k,
                    device=args.device,
                )
                name = "linear probe" if method == "linear" else f"{args.k}-NN"
                print(
                    f"{probe['model']} frozen features, {name} fitted on {probe['train_rows']} train rows: "
                    f"{probe['dataset']} {probe['split']} ({probe['n']} images) accuracy {probe['accuracy']:.4f}"
                )
        return 0
    from ..tasks import evaluate_checkpoint

    report = evaluate_checkpoint(
        loaded,
        dataset=args.dataset,
        data_dir=args.data_dir,
        split=args.split,
        temperature_scale=args.temperature_scale,
        out_dir=args.out,
        overwrite=args.overwrite,
        device=args.device,
        options=source_data_options(args),
    )
    print(
        f"{report['model']} on {report['dataset']} {report['split']} ({report['n']} images): "
        f"accuracy {report['accuracy']:.4f}  NLL {report['nll']:.4f}  ECE {report['ece']:.4f}"
    )
    if "temperature" in report:
        cal = report["calibrated"]
        print(f"temperature {report['temperature']:.3f} (fitted on val): NLL {cal['nll']:.4f}  ECE {cal['ece']:.4f}")
    worst = sorted((acc, name) for name, acc in report["per_class_accuracy"].items() if acc is not None)[:3]
    print("lowest per-class accuracy: " + ", ".join(f"{name} {acc:.3f}" for acc, name in worst))
    if args.out:
        print(f"wrote {args.out}/metrics.json, reliability.png, confusion.png")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "evaluate",
        help="evaluate a checkpoint: accuracy, NLL, calibration, confusion",
        description="Evaluate a checkpoint written by `vitlab train --out` (a run folder, a "
        "checkpoint folder or a model.safetensors) on a split of its dataset.",
    )
    p.add_argument(
        "checkpoint",
        help="run folder (uses best/), checkpoint folder or file, timm / Hugging Face weights or folder, .keras",
    )
    p.add_argument("--dataset", help="dataset name (default: the one it was trained on)")
    p.add_argument("--data-dir", help="folder holding the dataset's files (default: the training run's)")
    p.add_argument("--split", default="test", choices=SPLITS)
    p.add_argument("--temperature-scale", action="store_true", help="fit a temperature on val, report before/after")
    p.add_argument("--out", help="folder for metrics.json, reliability.png, confusion.png")
    p.add_argument("--overwrite", action="store_true", help="replace the evaluation already in --out")
    p.add_argument("--linear-probe", action="store_true", help="accuracy of a linear classifier on frozen features")
    p.add_argument("--knn", action="store_true", help="accuracy of weighted k-NN on frozen features")
    p.add_argument("--k", type=int, default=20, help="neighbours for --knn")
    p.add_argument("--rows", type=int, help="probes: fit on the first N training rows only")
    p.add_argument("--device", default="auto")
    add_data_options(p)
    add_source_options(p, compile=True)
    p.set_defaults(func=run)
