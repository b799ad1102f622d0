"""``vitlab shapes``: tensor shapes through one ViT block, read from a real forward pass."""

from __future__ import annotations

import argparse

from ..checks import Int, check_options
from ..errors import ConfigError
from ..models.config import MAX_CHANS, MAX_DEPTH, MAX_HEADS, MAX_SIDE, MAX_WIDTH
from ..models.summary import SHAPE_LAYOUT, qk_variance, qk_variance_figure, softmax_peak, trace_shapes
from .cost import print_table

OPTIONS = {
    "image": Int(1, MAX_SIDE),
    "patch": Int(1, MAX_SIDE),
    "dim": Int(1, MAX_WIDTH),
    "heads": Int(1, MAX_HEADS),
    "channels": Int(1, MAX_CHANS),
    "depth": Int(1, MAX_DEPTH),
}
QK_DIMS = (4, 16, 64, 256)  # --qk-variance: the head widths d_k it measures
QK_SAMPLES = 10_000
QK_KEYS = 64  # --qk-variance: the keys one query's softmax runs over


def print_qk_variance(plot: str | None = None) -> None:
    """The variance of ``q . k`` for standard-normal ``q, k``, measured beside the theory, and the
    largest softmax weight over :data:`QK_KEYS` keys with and without ``1/sqrt(d_k)``, per ``d_k``;
    ``plot``: also draw both against ``d_k`` into this PNG."""
    print(
        f"q . k for standard-normal q, k ({QK_SAMPLES:,} seeded samples per d_k): the variance grows as d_k;\n"
        "dividing by sqrt(d_k) brings it back to 1, so the softmax's sharpness does not depend on the head width\n"
        f"(max weight: the largest softmax weight of one query over {QK_KEYS} keys, mean of 1,000 queries)"
    )
    measured = {d: qk_variance(d, QK_SAMPLES) for d in QK_DIMS}
    peaks = {d: softmax_peak(d, QK_KEYS) for d in QK_DIMS}
    print_table(
        ("d_k", "Var(q.k)", "theory", "Var(q.k / sqrt(d_k))", "theory", "max weight", "scaled max weight"),
        [
            (str(d), f"{raw:.2f}", str(d), f"{scaled:.3f}", "1", f"{peaks[d][0]:.3f}", f"{peaks[d][1]:.3f}")
            for d, (raw, scaled) in measured.items()
        ],
    )
    if plot:
        qk_variance_figure(measured, peaks, QK_KEYS).savefig(plot, dpi=120)
        print(f"wrote {plot}")


def run(args: argparse.Namespace) -> int:
    if args.plot and not args.qk_variance:
        raise ConfigError(f"--plot {args.plot} draws the --qk-variance figure: add --qk-variance or drop --plot")
    if args.qk_variance:
        print_qk_variance(args.plot)
        return 0
    check_options(args, OPTIONS)
    shapes = trace_shapes(
        image=args.image,
        patch=args.patch,
        dim=args.dim,
        heads=args.heads,
        class_token=args.class_token,
        channels=args.channels,
        depth=args.depth,
    )
    patches, tokens, head_dim = shapes["X_patch"][1], shapes["block input"][1], shapes["Q"][-1]
    print(
        f"image {args.image}x{args.image}x{args.channels}, patch P={args.patch}, D={args.dim}, "
        f"H={args.heads} heads of d={head_dim}, depth {args.depth}, batch B=1"
    )
    print(f"N={patches} patches, T={tokens} tokens" + (" (N + class token)" if args.class_token else ""))
    width = max(map(len, shapes)) + 2
    for name, shape in shapes.items():
        print(f"{name:{width}}{SHAPE_LAYOUT[name]:16}{shape}")
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
    p.add_argument("--plot", metavar="PNG", help="with --qk-variance: also draw it against d_k into this PNG")
    p.set_defaults(func=run)
