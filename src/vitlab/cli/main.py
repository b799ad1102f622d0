"""The ``vitlab`` command: one sub-command per module in this package.

Every module here except this one defines ``register(subparsers)``, which adds its parser and
sets ``func`` to a function ``(args) -> int`` that calls into the library and prints.
Commands are thin: parse, call one library function, print.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys




def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vitlab", description="Vision Transformers: understand, train, "
                                     "compare, explain and scale.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(importlib.import_module(__package__).__path__), key=lambda i: i.name):
        if info.name != "main":
            importlib.import_module(f"{__package__}.{info.name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, TypeError) as err:
        print(f"vitlab {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
