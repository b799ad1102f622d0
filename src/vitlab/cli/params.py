"""``vitlab params MODEL``: the parameter count by component, with totals."""

from __future__ import annotations

import argparse

from ..models import count_params, create_model
from ..models.summary import Row, conv_params, parameter_table, trainable_position_params
from ..models.vit import VisionTransformer
from . import parse_overrides

# Registered models whose count with fixed positions is the total the textbook prints for them.
TEXTBOOK_TOTALS = {"vit-seed": "the total the textbook prints for its Keras version of this model"}


BUILD_LIMIT_GIB = 4.0
"""The default of ``--max-gib``: the most memory (GiB, fp32 weights and fixed tables) `vitlab params` builds a
model in to count it; a larger model is refused before anything is allocated, naming its estimate."""


def check_build_size(name: str, overrides: dict, limit_gib: float) -> None:
    """Refuse, before building, a model whose estimated weights and fixed tables (``approx_params`` of its
    config, 4 bytes each) are over ``limit_gib`` GiB, naming the estimate and the limit."""
    from ..errors import ConfigError
    from ..models import get_config

    if not limit_gib > 0:
        raise ConfigError(f"--max-gib must be a positive number of GiB, got {limit_gib}")
    params = getattr(get_config(name, **overrides), "approx_params", None)
    if params is None:
        return
    gib = 4 * params / 2**30
    if gib > limit_gib:
        said = ", ".join(f"{k}={v}" for k, v in overrides.items())
        raise ConfigError(
            f"{name}{f' with {said}' if said else ''} has about {params:,} parameters (position tables included), "
            f"{gib:,.1f} GiB at fp32: `vitlab params` builds the model to count it and builds at most "
            f"{limit_gib:g} GiB (--max-gib); raise --max-gib if this machine has the memory, or lower the sizes"
        )


def run(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.set)
    check_build_size(args.model, overrides, args.max_gib)
    model = create_model(args.model, **overrides)
    rows = parameter_table(model)
    total, trainable = count_params(model, trainable_only=False), count_params(model)
    width = max(len("non-trainable"), *(len(r.component) for r in rows)) + 2
    size_width = max(len("size"), *(len(r.size) for r in rows)) + 2
    print(f"{args.model} ({type(model).__name__})")
    print(f"{'component':{width}}{'size':{size_width}}{'params':>12}")
    for r in rows:
        print(f"{r.component:{width}}{r.size:{size_width}}{r.params:>12,}")
    for label, count in (("total", total), ("trainable", trainable), ("non-trainable", total - trainable)):
        print(f"{label:{width + size_width}}{count:>12,}")
    positions = trainable_position_params(model)
    if positions:
        fixed = total - positions
        print(
            f"\nnote: {positions:,} of these are the learned position table. With fixed positions\n"
            f"(--set pos_embed=sincos2d) the same model has {total:,} - {positions:,} = {fixed:,} parameters."
        )
        if args.model in TEXTBOOK_TOTALS and not overrides:
            print(f"{fixed:,} is {TEXTBOOK_TOTALS[args.model]}: it counts the positions as not trainable.")
    if isinstance(model, VisionTransformer):
        print_conv_comparison(model, rows, positions)
    return 0


def print_conv_comparison(model: VisionTransformer, rows: list[Row], positions: int) -> None:
    """The input stage priced against a 3x3 convolution of the same width on the same channels."""
    c, d, k = model.config.in_chans, model.config.embed_dim, 3
    projection = next(r.params for r in rows if r.component == "patch projection")
    where = f" and {positions:,} on the position table" if positions else ""
    print(
        f"\nfor comparison: Conv2D({d}, {k}x{k}) on {c} channel{'s' * (c != 1)} = {k}*{k}*{c}*{d} + {d} = "
        f"{conv_params(c, d, k):,} parameters,\nthe price of a convolution's spatial prior; this ViT spends "
        f"{projection:,} on the patch projection{where}."
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="count a model's parameters by component")
    p.add_argument("model", help="a registered model name (see `vitlab models`)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set depth=4 (repeatable)",
    )
    p.add_argument(
        "--max-gib",
        type=float,
        default=BUILD_LIMIT_GIB,
        metavar="GIB",
        help=f"build no model estimated above this many GiB of weights and tables (default {BUILD_LIMIT_GIB:g})",
    )
    p.set_defaults(func=run)
