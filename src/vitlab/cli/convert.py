"""``vitlab convert``: a timm / Hugging Face / vitlab checkpoint file to vitlab or timm."""
from __future__ import annotations

import argparse

from ..interop import convert_file, timm_kwargs
from ..interop.checkpoint import SOURCES, TARGETS
from . import parse_overrides


def run(args: argparse.Namespace) -> int:
    config = parse_overrides(args.set)
    if args.num_heads is not None:
        config["num_heads"] = args.num_heads
    result = convert_file(args.src, args.dst, source=args.source, target=args.target, img_size=args.img_size,
                          **config)
    cfg = result.config
    print(f"read   {result.src}  ({result.source} weights, {result.num_tensors} tensors)")
    written = "vitlab safetensors with its config" if result.target == "vitlab" else "timm state dict"
    print(f"wrote  {result.dst}  ({written})")
    print(f"model  img {cfg.img_size[0]}x{cfg.img_size[1]}x{cfg.in_chans}, patch {cfg.patch_size}, "
          f"width {cfg.embed_dim}, depth {cfg.depth}, heads {cfg.num_heads}, mlp x{cfg.mlp_ratio:g}, "
          f"pos {cfg.pos_embed}, class token {cfg.class_token}, registers {cfg.reg_tokens}, pool {cfg.pool}, "
          f"classes {cfg.num_classes}, norm eps {cfg.norm_eps:g}")
    print(f"params {result.num_params:,}")
    for name, why in result.guessed.items():
        print(f"guessed {name} = {why}; set it with --set {name}=... if the source differs")
    if result.target == "timm":
        print(f"timm   VisionTransformer(**{timm_kwargs(cfg)})")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("convert", help="convert a timm / Hugging Face / vitlab checkpoint file",
                       description="Read SRC (safetensors, or a torch file read with weights_only=True) and write "
                                   "DST: a vitlab safetensors checkpoint carrying its config, or a timm state dict.")
    p.add_argument("src", help="checkpoint file to read (a Hugging Face config.json beside it is used)")
    p.add_argument("dst", help="file to write (.safetensors; .pth/.pt/.bin for a torch file with --to timm)")
    p.add_argument("--from", dest="source", choices=SOURCES, default="auto", help="source format (default: auto)")
    p.add_argument("--to", dest="target", choices=TARGETS, default="vitlab", help="target format (default: vitlab)")
    p.add_argument("--num-heads", type=int, help="attention heads, which weights do not record (default: width/64)")
    p.add_argument("--img-size", type=int, help="run at this image size, resampling learned positions")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="any ViTConfig field the file does not record (repeatable), e.g. --set pool=token")
    p.set_defaults(func=run)
