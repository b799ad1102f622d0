"""``vitlab pretrain mae|dino``: self-supervised pretraining of a ViT, saved for ``vitlab train --init``."""
from __future__ import annotations

import argparse

from ..ssl import MAEConfig, PretrainConfig, pretrain
from ..ssl.pretrain import IMAGE_SETS, METHODS
from . import parse_overrides

# argparse destination -> PretrainConfig field, for the options that map one to one
FIELDS = ("model", "dataset", "data_dir", "images", "epochs", "batch_size", "lr", "seed", "device",
          "local_crops")


def run(args: argparse.Namespace) -> int:
    given = {name: getattr(args, name) for name in FIELDS if getattr(args, name) is not None}
    config = PretrainConfig(method=args.method, out_dir=args.out, model_overrides=parse_overrides(args.set),
                            mae=MAEConfig(mask_ratio=args.mask_ratio, norm_pix_loss=args.norm_pix_loss), **given)
    result = pretrain(config)
    last = result.history[-1]
    monitors = "".join(f", {k} {last[k]:.4f}" for k in ("teacher_entropy", "teacher_student_kl") if k in last)
    print(f"{config.method} pretraining of {config.model} on {config.dataset}: {len(result.history)} epochs, "
          f"{result.seconds:.1f}s, final loss {last['loss']:.4f}{monitors}")
    if result.checkpoint is not None:
        print(f"encoder: {result.checkpoint} (fine-tune with `vitlab train --init {args.out}`)")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pretrain", help="self-supervised pretraining (masked autoencoder or DINO)",
                       description="Pretrain a ViT without labels; --out saves the encoder as a checkpoint "
                       "for `vitlab train --init` and `vitlab evaluate --linear-probe/--knn`.")
    p.add_argument("method", choices=METHODS)
    p.add_argument("--model", help="registered ViT name; default vit-digits")
    p.add_argument("--dataset", help="dataset name; default digits")
    p.add_argument("--data-dir", help="folder holding the dataset's files")
    p.add_argument("--images", choices=IMAGE_SETS,
                   help="pretrain on the train split (default) or on every split's images (labels unused)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--mask-ratio", type=float, default=0.75, help="MAE: fraction of patches hidden")
    p.add_argument("--norm-pix-loss", action="store_true", help="MAE: per-patch normalised targets")
    p.add_argument("--local-crops", type=int, help="DINO: number of local crops (default 4)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="model config override")
    p.add_argument("--seed", type=int)
    p.add_argument("--device", help="auto (default), cpu, cuda, ...")
    p.add_argument("--out", help="folder for model.safetensors, metrics.jsonl and figures")
    p.set_defaults(func=run)
