"""``vitlab models``: list the registered model names."""

from __future__ import annotations

import argparse

from ..models import describe_model, list_models


def run(args: argparse.Namespace) -> int:
    for name in list_models(args.filter):
        print(f"{name:28s} {describe_model(name)}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list registered models")
    p.add_argument("filter", nargs="?", default="", help="only names containing this text")
    p.set_defaults(func=run)
