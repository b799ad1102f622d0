"""``vitlab cost``: tokens, attention entries, FLOPs and score memory per (image, patch) pair, with
columns per kind of attention, ``--plot`` (memory and time against resolution, log-log), and the token
pairs one 3x3 convolution mixes against full attention's ``N^2``."""

from __future__ import annotations

import argparse

from ..analysis.cost import ATTENTION_COSTS, Workload
from ..analysis.cost_report import PLOT_SIDES, cost_report
from ..checks import check_options
from .outputs import FIGURE_SUFFIXES, Output, add_output

# The Workload field each sizing option sets.
FIELDS = {
    "dim": "dim",
    "depth": "depth",
    "heads": "heads",
    "mlp_ratio": "mlp_ratio",
    "channels": "in_chans",
    "batch": "batch",
    "class_token": "class_token",
    "window": "window_size",
    "rank": "lowrank_k",
    "latents": "num_latents",
    "sparse_local": "sparse_local",
    "sparse_stride": "sparse_stride",
}
# The cost_report keyword each choice of rows and output sets.
REPORT = {"pairs": "pairs", "image": "images", "patch": "patches", "json": "as_json", "plot": "plot"}


def _ints(text: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, e.g. 224,448; got {text!r}") from None


def _pairs(text: str) -> list[tuple[int, int]]:
    try:
        return [(int(image), int(patch)) for image, patch in (item.split("/") for item in text.split(","))]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected IMAGE/PATCH pairs, e.g. 28/7,224/16; got {text!r}") from None


def _kinds(text: str) -> list[str]:
    kinds = list(ATTENTION_COSTS) if text == "all" else [v.strip() for v in text.split(",") if v.strip()]
    unknown = [k for k in kinds if k not in ATTENTION_COSTS]
    if unknown or not kinds:
        raise argparse.ArgumentTypeError(
            f"unknown attention {unknown or text!r}: choose from "
            f"{', '.join(ATTENTION_COSTS)} (comma-separated) or 'all'"
        )
    return kinds


def run(args: argparse.Namespace) -> int:
    check_options(args, {option: Workload.checks[field] for option, field in FIELDS.items()})
    sizes = {field: getattr(args, option) for option, field in FIELDS.items()}
    report = {keyword: getattr(args, option) for option, keyword in REPORT.items()}
    print(cost_report(sizes, args.attention, **report))
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
    p.add_argument(
        "--attention",
        type=_kinds,
        default=["full", "window", "linear"],
        help=f"kinds of attention to price, comma-separated or 'all' ({', '.join(ATTENTION_COSTS)}; "
        "default full,window,linear): a FLOPs and a memory column for each kind besides full",
    )
    p.add_argument("--window", type=int, default=7, help="window side M for windowed attention (default 7)")
    p.add_argument(
        "--rank", type=int, default=64, help="k, the rows keys/values are projected to (lowrank; default 64)"
    )
    p.add_argument("--latents", type=int, default=16, help="learned latent tokens (latent; default 16)")
    p.add_argument("--sparse-local", type=int, help="band radius l for sparse attention (default: the grid's width)")
    p.add_argument(
        "--sparse-stride", type=int, help="stride s of sparse attention's strided positions (default: the grid's width)"
    )
    add_output(
        p,
        "--plot",
        rule=Output("figure", FIGURE_SUFFIXES),
        metavar="PNG",
        help="also draw attention memory and FLOPs against the image side "
        f"(log-log) for the --attention kinds; without --image: sides {','.join(map(str, PLOT_SIDES))}",
    )
    p.add_argument("--overwrite", action="store_true", help="replace the --plot file if it exists")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)
