"""``vitlab convert SRC DST``: any model source to a vitlab checkpoint or a timm state dict."""

from __future__ import annotations

import argparse

from ..settings import picked
from . import parse_overrides
from .outputs import Output, add_output

TARGETS = ("vitlab", "timm")


def run(args: argparse.Namespace) -> int:
    from ..runs.convert import convert

    config = parse_overrides(args.set)
    if args.num_heads is not None:
        config["num_heads"] = args.num_heads
    options = picked(args, "target", "model", "img_size", "overwrite")
    result = convert(args.src, args.dst, **options, **config)
    print(result.report(args.dst))
    return 0


def convert_output(args: argparse.Namespace) -> Output:
    """What DST is for ``--to``: a vitlab checkpoint (.safetensors) or a timm state dict (safetensors or torch)."""
    if args.target == "timm":
        return Output("timm state dict", (".safetensors", ".pth", ".pt", ".bin"))
    return Output("vitlab checkpoint", (".safetensors",))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert",
        help="convert a timm / Hugging Face / vitlab checkpoint file",
        description="Read SRC (a vitlab file or run folder, a timm or Hugging Face state dict, a "
        "Hugging Face folder, a .keras file) and write DST: a vitlab checkpoint carrying "
        "its config and data config, or a timm state dict. What the source does not "
        "record is inferred, printed and recorded in the written file.",
    )
    p.add_argument("src", help="model source to read")
    add_output(
        p,
        "dst",
        rule=convert_output,
        help="file to write (.safetensors; .pth/.pt/.bin for a torch file with --to timm)",
    )
    p.add_argument("--to", dest="target", choices=TARGETS, default="vitlab", help="target format (default: vitlab)")
    p.add_argument("--model", help="registered architecture of a foreign file (e.g. vit-tiny-patch16-224)")
    p.add_argument(
        "--num-heads", type=int, help="attention heads, which a timm state dict does not record (required for one)"
    )
    p.add_argument("--img-size", type=int, help="run at this image size, resampling learned positions")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any model config field the file does not record (repeatable), e.g. --set pool=token",
    )
    p.add_argument("--overwrite", action="store_true", help="replace DST if it exists")
    p.set_defaults(func=run)
