"""``vitlab params MODEL``: the parameter count by component, with totals."""

from __future__ import annotations

import argparse

from ..analysis.params import BUILD_LIMIT_GIB, params_report
from . import parse_overrides


def run(args: argparse.Namespace) -> int:
    from ..models.tuning import TuneOptions

    sets = parse_overrides(args.set)
    tune = {k.removeprefix("tune."): v for k, v in sets.items() if k.startswith("tune.")}
    overrides = {k: v for k, v in sets.items() if not k.startswith("tune.")}
    options = TuneOptions(**tune) if tune else None
    print(params_report(args.model, overrides, args.max_gib, args.tune, options))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    from ..models.tuning import TUNE_HELP

    p = sub.add_parser("params", help="count a model's parameters by component")
    p.add_argument("model", help="a registered model name (see `vitlab models`)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config field, e.g. --set depth=4, or a training mode's, --set tune.rank=8 (repeatable)",
    )
    p.add_argument("--tune", metavar="MODE", help=f"count what trains under a training mode: {TUNE_HELP}")
    p.add_argument(
        "--max-gib",
        type=float,
        default=BUILD_LIMIT_GIB,
        metavar="GIB",
        help=f"build no model estimated above this many GiB of weights and tables (default {BUILD_LIMIT_GIB:g})",
    )
    p.set_defaults(func=run)
