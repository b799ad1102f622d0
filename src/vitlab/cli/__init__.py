"""Command-line interface: one module per sub-command (see :mod:`vitlab.cli.main`), and the
option parsing they share."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["depth=4", "pos_embed=sincos2d", "widths=[16,32]"]`` -> config overrides: JSON values
    where they parse (numbers, true/false/null, lists), the text otherwise."""
    overrides = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key=value, got {item!r}: e.g. --set depth=4")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            overrides[key] = text
    return overrides


def add_common(parser: argparse.ArgumentParser, out: str, overwrite: bool = True) -> None:
    """The options that mean the same in every command: ``--out`` (what it writes; ``out`` says
    what), ``--overwrite``, ``--device``, ``--threads``, ``--quiet``."""
    parser.add_argument("--out", help=out)
    if overwrite:
        parser.add_argument(
            "--overwrite",
            action="store_true",
            help="replace the vitlab run already in --out (never files vitlab did not write)",
        )
    parser.add_argument("--device", help="auto (default: CUDA when present), cpu, cuda, cuda:N, mps")
    parser.add_argument(
        "--threads",
        type=int,
        help="CPU threads per process (default: torch's; 1 is often fastest for small models on a busy machine)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress output")


def add_source_options(parser: argparse.ArgumentParser, compile: bool = False) -> None:
    """``--model NAME`` and ``--set FIELD=VALUE``: what foreign weights (a timm state dict) do not
    record, as in ``vitlab convert``; with ``compile``, ``--compile``."""
    parser.add_argument(
        "--model", metavar="NAME", help="foreign weights: the registered architecture they hold (see `vitlab models`)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="foreign weights: a model config field they do not record, e.g. --set num_heads=3 (repeatable)",
    )
    if compile:
        parser.add_argument(
            "--compile", action="store_true", help="compile the model's forward with torch.compile before scoring"
        )


def load_source(args: argparse.Namespace, command: str) -> Any:
    """``load_checkpoint(args.checkpoint)`` on ``args.device`` with the :func:`add_source_options`;
    each guess is said on stderr. Returns the :class:`~vitlab.runs.Loaded`."""
    import sys

    from ..runs import load_checkpoint

    hints = parse_overrides(args.set)
    loaded = load_checkpoint(args.checkpoint, args.device, model=args.model, **hints)
    if (args.model is not None or hints) and loaded.metadata.get("source") not in ("timm", "hf"):
        raise ConfigError(
            f"--model and --set describe foreign weights; {loaded.path} records its own config: drop them"
        )
    for name, why in loaded.guessed.items():
        print(f"vitlab {command}: guessed {name} = {why}", file=sys.stderr)
    if getattr(args, "compile", False):
        from ..engine.loop import compile_forward

        compile_forward(loaded.model)
    return loaded


def apply_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)`` for a positive count; refuses 0 and negatives."""
    if threads is None:
        return
    if threads < 1:
        raise ConfigError(f"--threads must be a positive number of CPU threads, got {threads}")
    import torch

    torch.set_num_threads(threads)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """A run config from a YAML or JSON file (a run folder's ``config.json`` included): a mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no config file at {path}")
    text = path.read_text()
    try:
        if path.suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        else:
            data = json.loads(text)
    except Exception as err:  # yaml and json raise their own error types
        raise ConfigError(
            f"{path} is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}: "
            f"{' '.join(str(err).split())}"
        ) from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping of config fields, got {type(data).__name__}")
    return data
