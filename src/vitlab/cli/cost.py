"""``vitlab cost``: tokens, attention entries, FLOPs and score memory per (image, patch) pair, with
columns per kind of attention, ``--plot`` (memory and time against resolution, log-log), and the token
pairs one 3x3 convolution mixes against full attention's ``N^2``."""

from __future__ import annotations

import argparse
import itertools
import json

from ..checks import check_options
from ..models.cost import ATTENTION_COSTS, TEXTBOOK_PAIRS, Workload, cost_figure, cost_table, interactions

PLOT_SIDES = (224, 320, 448, 640, 896, 1024, 1536, 2048)  # --plot without --image: these, at patch 16
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


def _scaled(value: float, units: tuple[str, ...], step: int) -> str:
    """``1843968, ("B", "KiB", ...), 1024 -> "1.8 MiB"``."""
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:.0f} {unit}" if unit == units[0] else f"{value:.1f} {unit}"
        value /= step
    return f"{value:.1f} {units[-1]}"


def print_table(header: tuple[str, ...], table: list[tuple[str, ...]]) -> None:
    """Print ``header`` and the rows right-aligned, each column as wide as its widest cell."""
    widths = [max(len(line[i]) for line in [header, *table]) for i in range(len(header))]
    for line in [header, *table]:
        print("  ".join(cell.rjust(w) for cell, w in zip(line, widths)))


def select_pairs(args: argparse.Namespace) -> tuple[tuple[int, int], ...]:
    """The pairs asked for: ``--pairs``, every ``--image`` x ``--patch``, or the textbook's."""
    if args.pairs and (args.image or args.patch):
        raise ValueError("give either --pairs or --image/--patch, not both")
    if bool(args.image) != bool(args.patch):
        raise ValueError("--image and --patch go together (every image with every patch); or give --pairs 224/16,224/8")
    if args.pairs:
        return tuple(args.pairs)
    if args.image:
        return tuple(itertools.product(args.image, args.patch))
    return TEXTBOOK_PAIRS


def run(args: argparse.Namespace) -> int:
    if args.plot and not (args.pairs or args.image):
        args.image, args.patch = list(PLOT_SIDES), args.patch or [16]
    check_options(args, {option: Workload.checks[field] for option, field in FIELDS.items()})
    pairs = select_pairs(args)
    sizes = {field: getattr(args, option) for option, field in FIELDS.items()}
    rows = cost_table(pairs, **sizes)
    others = {kind: cost_table(pairs, attention=kind, **sizes) for kind in args.attention if kind != "full"}
    if args.plot:
        patches = sorted({patch for _, patch in pairs})
        if len(patches) != 1:
            raise ValueError(
                f"--plot draws against resolution at one patch size, got patches {patches}: "
                f"give --image 224,448,896 --patch 16"
            )
        cost_figure(tuple(sorted({image for image, _ in pairs})), patches[0], tuple(args.attention), **sizes).savefig(
            args.plot, dpi=120
        )
    mixed = [interactions(image, patch) for image, patch in pairs]
    if args.json:
        print(
            json.dumps(
                {
                    "settings": sizes,
                    "rows": [r.to_dict() for r in rows],
                    "attention": {kind: [r.to_dict() for r in table] for kind, table in others.items()},
                    "interactions": [m.to_dict() for m in mixed],
                },
                indent=2,
            )
        )
        return 0
    flops, memory = (("", "K", "M", "G", "T", "P"), 1000), (("B", "KiB", "MiB", "GiB", "TiB"), 1024)
    print(
        f"ViT dim={args.dim} depth={args.depth} heads={args.heads} mlp_ratio={args.mlp_ratio} "
        f"channels={args.channels} batch={args.batch}" + (" + class token" if args.class_token else "")
    )
    print(
        "entries: attention scores per head per layer (N^2); FLOPs: forward, 2 per multiply-add;\n"
        "scores: B x H x N x N at fp32, one layer"
        + (
            f"; per other kind, its FLOPs and attention memory (window {args.window}, low-rank k {args.rank}, "
            f"{args.latents} latents; sparse: band {args.sparse_local or 'grid width'}, stride "
            f"{args.sparse_stride or 'grid width'}; linear: its d x d state)"
            if others
            else ""
        )
    )
    header = ("image", "patch", "tokens", "entries", "vs first", "FLOPs", "scores") + tuple(
        f"{what} {kind}" for kind in others for what in ("FLOPs", "mem")
    )
    table = [
        (
            f"{r.image}x{r.image}",
            str(r.patch),
            f"{r.tokens:,}",
            f"{r.entries:,}",
            f"{r.ratio:,.1f}x",
            _scaled(r.flops, *flops),
            _scaled(r.attention_memory, *memory),
        )
        + tuple(
            cell
            for t in others.values()
            for cell in (_scaled(t[i].flops, *flops), _scaled(t[i].attention_memory, *memory))
        )
        for i, r in enumerate(rows)
    ]
    print_table(header, table)
    print(
        "\npairs that interact in one layer, on the same patch grid (class token left out): a 3x3 convolution\n"
        "mixes each token with its 3x3 neighbourhood (exact count, cut at the borders; 9N inside), full attention\n"
        "every token with every token (N^2)"
    )
    print_table(
        ("tokens N", "grid", "3x3 conv", "9N", "attention N^2", "attention / conv"),
        [
            (
                f"{m.tokens:,}",
                f"{m.grid[0]}x{m.grid[1]}",
                f"{m.conv3x3:,}",
                f"{m.interior_9n:,}",
                f"{m.attention:,}",
                f"{m.attention / m.conv3x3:,.1f}x",
            )
            for m in mixed
        ],
    )
    if args.plot:
        print(f"wrote {args.plot}")
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
    p.add_argument(
        "--plot",
        metavar="PNG",
        help="also draw attention memory and FLOPs against the image side "
        f"(log-log) for the --attention kinds; without --image: sides {','.join(map(str, PLOT_SIDES))}",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=run)
