"""``vitlab models``: list the registered model names."""

from __future__ import annotations

import argparse

from ..models import describe_models


def run(args: argparse.Namespace) -> int:
    for line in describe_models(args.filter):
        print(line)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list registered models")
    p.add_argument("filter", nargs="?", default="", help="only names containing this text")
    p.set_defaults(func=run)
