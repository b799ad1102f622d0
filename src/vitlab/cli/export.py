"""``vitlab export CKPT --to onnx|timm|hf --out PATH``: a checkpoint for another runtime."""

from __future__ import annotations

import argparse

from .outputs import Output, add_output


def run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..tasks.classify.export import export_adapters, export_checkpoint

    if args.adapters_only:
        print(export_adapters(args.checkpoint, args.out, overwrite=args.overwrite))
        return 0
    if args.target is None:
        raise ConfigError("say where to export: --to onnx|timm|hf (or --adapters-only for a tuned run's adapters)")
    print(export_checkpoint(args.checkpoint, args.target, args.out, opset=args.opset, overwrite=args.overwrite))
    return 0


def export_output(args: argparse.Namespace) -> Output | None:
    """What ``--out`` is for the options given: the adapters' .safetensors, the .onnx file, or a folder."""
    if args.adapters_only:
        return Output("adapters file", (".safetensors",))
    if args.target == "onnx":
        return Output("ONNX file", (".onnx",))
    return Output(f"{args.target} folder") if args.target in ("timm", "hf") else None


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a checkpoint to ONNX, timm or Hugging Face",
        description="Write the classifier in CKPT (any source `vitlab convert` reads) for another "
        "runtime: an ONNX file (batch size free), a timm folder (config.json with "
        "pretrained_cfg + model.safetensors) or a Hugging Face ViTForImageClassification "
        "folder. Each computes the same logits; options a target cannot hold are "
        "refused by name. A tuned run (--tune) exports merged into plain weights; a prompt-tuned one "
        "to ONNX only.",
    )
    p.add_argument("checkpoint", help="checkpoint file, checkpoint or run folder, or foreign weights")
    p.add_argument("--to", dest="target", metavar="onnx|timm|hf", help="target format")
    add_output(
        p, "--out", rule=export_output, required=True, help="the .onnx file (onnx) or the folder (timm, hf) to write"
    )
    p.add_argument("--opset", type=int, default=18, help="ONNX opset version (default: 18)")
    p.add_argument("--overwrite", action="store_true", help="replace the files an earlier export wrote at --out")
    p.add_argument(
        "--adapters-only",
        action="store_true",
        help="write only the tensors a tuned run trained (safetensors, with the base model's identity and hash)",
    )
    p.set_defaults(func=run)
