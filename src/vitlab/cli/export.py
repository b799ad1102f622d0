"""``vitlab export CKPT --to onnx|timm|hf --out PATH``: a checkpoint for another runtime."""

from __future__ import annotations

import argparse


def run(args: argparse.Namespace) -> int:
    from ..tasks.classify.export import export_checkpoint

    print(export_checkpoint(args.checkpoint, args.target, args.out, opset=args.opset, overwrite=args.overwrite))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a checkpoint to ONNX, timm or Hugging Face",
        description="Write the classifier in CKPT (any source `vitlab convert` reads) for another "
        "runtime: an ONNX file (batch size free), a timm folder (config.json with "
        "pretrained_cfg + model.safetensors) or a Hugging Face ViTForImageClassification "
        "folder. Each computes the same logits; options a target cannot hold are "
        "refused by name.",
    )
    p.add_argument("checkpoint", help="checkpoint file, checkpoint or run folder, or foreign weights")
    p.add_argument("--to", dest="target", required=True, metavar="onnx|timm|hf", help="target format")
    p.add_argument("--out", required=True, help="the .onnx file (onnx) or the folder (timm, hf) to write")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset version (default: 18)")
    p.add_argument("--overwrite", action="store_true", help="replace the files an earlier export wrote at --out")
    p.set_defaults(func=run)
