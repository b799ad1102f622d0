"""``vitlab shapes``: tensor shapes through one ViT block, read from a real forward pass."""

from __future__ import annotations

import argparse

from ..analysis.qk import QK_DIMS, qk_variance_report
from ..analysis.shapes import shapes_report
from ..checks import Int, check_options
from ..errors import ConfigError
from ..models.config import MAX_CHANS, MAX_DEPTH, MAX_HEADS, MAX_SIDE, MAX_WIDTH
from ..settings import picked
from .outputs import FIGURE_SUFFIXES, Output, add_output

OPTIONS = {
    "image": Int(1, MAX_SIDE),
    "patch": Int(1, MAX_SIDE),
    "dim": Int(1, MAX_WIDTH),
    "heads": Int(1, MAX_HEADS),
    "channels": Int(1, MAX_CHANS),
    "depth": Int(1, MAX_DEPTH),
}


def run(args: argparse.Namespace) -> int:
    if args.plot and not args.qk_variance:
        raise ConfigError(f"--plot {args.plot} draws the --qk-variance figure: add --qk-variance or drop --plot")
    if args.qk_variance:
        print(qk_variance_report(args.plot))
        return 0
    check_options(args, OPTIONS)
    print(shapes_report(**picked(args, "class_token", *OPTIONS)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("shapes", help="shapes of patches, Q/K/V, scores and outputs in a ViT block")
    p.add_argument("--image", type=int, default=224, help="image side in pixels (default 224)")
    p.add_argument("--patch", type=int, default=16, help="patch side P (default 16)")
    p.add_argument("--dim", type=int, default=768, help="token width D (default 768)")
    p.add_argument("--heads", type=int, default=12, help="attention heads H (default 12)")
    p.add_argument("--channels", type=int, default=3, help="image channels C (default 3)")
    p.add_argument("--depth", type=int, default=1, help="blocks to run (default 1)")
    p.add_argument("--class-token", action="store_true", help="prepend a class token")
    p.add_argument(
        "--qk-variance",
        action="store_true",
        help=f"instead: the variance of q . k before and after dividing by sqrt(d_k), for d_k in {QK_DIMS}",
    )
    add_output(
        p,
        "--plot",
        rule=Output("figure", FIGURE_SUFFIXES),
        metavar="PNG",
        help="with --qk-variance: also draw it against d_k into this PNG",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the --plot file if it exists")
    p.set_defaults(func=run)
