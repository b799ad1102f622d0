"""``vitlab params MODEL``: the parameter count by component, with totals."""

from __future__ import annotations

import argparse

from ..analysis.params import BUILD_LIMIT_GIB, params_report
from . import parse_overrides


def run(args: argparse.Namespace) -> int:
    print(params_report(args.model, parse_overrides(args.set), args.max_gib))
    return 0


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
