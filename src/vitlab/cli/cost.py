"""``vitlab cost``: tokens, attention entries, FLOPs and score memory per (image, patch) pair."""
from __future__ import annotations

import argparse
import itertools
import json

from ..models.cost import TEXTBOOK_PAIRS, cost_table


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 224,448; got {text!r}")


def _pairs(text: str) -> list[tuple[int, int]]:
    try:
        return [(int(image), int(patch)) for image, patch in (item.split("/") for item in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IMAGE/PATCH pairs, e.g. 28/7,224/16; got {text!r}")


def _scaled(value: float, units: tuple[str, ...], step: int) -> str:
    """``1843968, ("B", "KiB", ...), 1024 -> "1.8 MiB"``."""
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:.0f} {unit}" if unit == units[0] else f"{value:.1f} {unit}"
        value /= step
    return f"{value:.1f} {units[-1]}"


def select_pairs(args: argparse.Namespace) -> tuple[tuple[int, int], ...]:
    """The pairs asked for: ``--pairs``, every ``--image`` x ``--patch``, or the textbook's."""
    if args.pairs and (args.image or args.patch):
        raise ValueError("give either --pairs or --image/--patch, not both")
    if bool(args.image) != bool(args.patch):
        raise ValueError("--image and --patch go together (every image with every patch); "
                         "or give --pairs 224/16,224/8")
    if args.pairs:
        return tuple(args.pairs)
    if args.image:
        return tuple(itertools.product(args.image, args.patch))
    return TEXTBOOK_PAIRS


def run(args: argparse.Namespace) -> int:
    sizes = dict(dim=args.dim, depth=args.depth, heads=args.heads, mlp_ratio=args.mlp_ratio,
                 batch=args.batch, class_token=args.class_token, in_chans=args.channels)
    rows = cost_table(select_pairs(args), **sizes)
    if args.json:
        print(json.dumps({"settings": sizes, "rows": [r.to_dict() for r in rows]}, indent=2))
        return 0
    print(f"ViT dim={args.dim} depth={args.depth} heads={args.heads} mlp_ratio={args.mlp_ratio} "
          f"channels={args.channels} batch={args.batch}" + (" + class token" if args.class_token else ""))
    print("entries: attention scores per head per layer (N^2); FLOPs: forward, 2 per multiply-add;\n"
          "scores: B x H x N x N at fp32, one layer")
    header = ("image", "patch", "tokens", "entries", "vs first", "FLOPs", "scores")
    table = [(f"{r.image}x{r.image}", str(r.patch), f"{r.tokens:,}", f"{r.entries:,}", f"{r.ratio:,.1f}x",
              _scaled(r.flops, ("", "K", "M", "G", "T", "P"), 1000),
              _scaled(r.attention_memory, ("B", "KiB", "MiB", "GiB", "TiB"), 1024))
             for r in rows]
    widths = [max(len(line[i]) for line in [header] + table) for i in range(len(header))]
    for line in [header] + table:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("cost", help="attention cost by token count (no arguments: the textbook's table)")
    p.add_argument("--image", type=_ints, help="image sides, e.g. 224,448 (with --patch: all pairs)")
    p.add_argument("--patch", type=_ints, help="patch sides, e.g. 16,8")
    p.add_argument("--pairs", type=_pairs, help="IMAGE/PATCH pairs, e.g. 28/7,224/16")
    p.add_argument("--dim", type=int, default=768, help="token width D (default 768)")
    p.add_argument("--depth", type=int, default=12, help="layers (default 12)")
    p.add_argument("--heads", type=int, default=12, help="attention heads (default 12)")
    p.add_argument("--mlp-ratio", type=float, default=4.0, help="MLP hidden width / D (default 4)")
    p.add_argument("--channels", type=int, default=3, help="image channels (default 3)")
    p.add_argument("--batch", type=int, default=1, help="batch size B (default 1)")
    p.add_argument("--class-token", action="store_true", help="add a class token to every sequence")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)
