"""``vitlab export CKPT --to onnx|timm|hf --out PATH``: a checkpoint for another runtime."""

from __future__ import annotations

import argparse

TARGETS = ("onnx", "timm", "hf")
CLASSIFIERS = ("classifier", "distilled-classifier")
LOADERS = {
    "onnx": 'onnxruntime.InferenceSession("{out}")  (input "images", output "logits")',
    "timm": 'timm.create_model("local-dir:{out}", pretrained=True)',
    "hf": 'transformers.ViTForImageClassification.from_pretrained("{out}")',
}


def run(args: argparse.Namespace) -> int:
    from ..errors import ConfigError
    from ..interop import export_hf, export_onnx, export_timm
    from ..runs import load_checkpoint

    loaded = load_checkpoint(args.checkpoint)
    if loaded.kind not in CLASSIFIERS:
        raise ConfigError(
            f"{loaded.path} holds a {loaded.kind}: vitlab export writes classifiers ({', '.join(CLASSIFIERS)})"
        )
    data = loaded.data
    if args.target == "onnx":
        export_onnx(loaded.model, args.out, data.image_size, data.in_chans, opset=args.opset, overwrite=args.overwrite)
    elif args.target == "hf":
        export_hf(loaded.model, args.out, data.classes, mean=data.mean, std=data.std, overwrite=args.overwrite)
    else:
        export_timm(loaded.model, args.out, data, overwrite=args.overwrite)
    height, width = data.image_size
    print(f"read   {loaded.path}  ({loaded.kind}{f', {loaded.name}' if loaded.name else ''})")
    print(
        f"wrote  {args.out}  ({args.target}: images (B, {data.in_chans}, {height}, {width}) -> "
        f"{len(data.classes) or 'the'} class logits)"
    )
    print(
        f"input  each image resized ({data.crop_mode}, crop_pct {data.crop_pct:g}, {data.interpolation}) and "
        f"centre-cropped to {height}x{width}, pixels in [0, 1], then (x - mean) / std with mean {tuple(data.mean)} "
        f"std {tuple(data.std)}: vitlab.load_checkpoint(CKPT).data.preprocess() does it"
    )
    print(f"load   {LOADERS[args.target].format(out=args.out)}")
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
    p.add_argument("--to", dest="target", choices=TARGETS, required=True, help="target format")
    p.add_argument("--out", required=True, help="the .onnx file (onnx) or the folder (timm, hf) to write")
    p.add_argument("--opset", type=int, default=18, help="ONNX opset version (default: 18)")
    p.add_argument("--overwrite", action="store_true", help="replace the files an earlier export wrote at --out")
    p.set_defaults(func=run)
