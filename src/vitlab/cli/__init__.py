"""Command-line interface: one module per sub-command (see :mod:`vitlab.cli.main`), and the
option parsing they share."""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import ConfigError
from ..settings import merge_settings, parse_overrides, read_config_file
from .outputs import Output, add_output


def add_common(parser: argparse.ArgumentParser, out: str, overwrite: bool = True) -> None:
    """The options that mean the same in every command: ``--out`` (what it writes; ``out`` says
    what), ``--overwrite``, ``--device``, ``--threads``, ``--quiet``."""
    add_output(parser, "--out", rule=Output("run folder"), help=out)
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


def add_data_options(parser: argparse.ArgumentParser, loader: bool = True) -> None:
    """The :class:`~vitlab.data.options.DataOptions` fields with a flag of their own (``--image-size``,
    and ``--loader`` for a command that reads a dataset); the others are ``--set data.FIELD=VALUE``."""
    for name, (flag, kind, help_text) in DATA_FLAGS.items():
        if name == "loader" and not loader:
            continue
        parser.add_argument(flag, dest=f"data_{name}", type=kind, metavar=name.upper(), help=help_text)


DATA_FLAGS: dict[str, tuple[str, type, str]] = {
    "image_size": (
        "--image-size",
        int,
        "the side images are read at, e.g. 224 (default: the model's own input size and preprocessing); crop, "
        "filter and mean/std are --set data.crop_pct=0.9, data.crop_mode=center, data.interpolation=bicubic, "
        "data.mean=[...], data.std=[...]",
    ),
    "loader": (
        "--loader",
        str,
        "auto (default: stream a one-epoch run or what would not fit in memory), memory (decoded once, uint8 at "
        "the model's size), or stream (decode image files in DataLoader workers every epoch; --set "
        "data.workers=N, data.max_bad_images=N)",
    ),
}


def data_options(args: argparse.Namespace) -> dict[str, Any]:
    """The data fields given by flag (:func:`add_data_options`), as ``{field: value}``."""
    return {
        name: getattr(args, f"data_{name}") for name in DATA_FLAGS if getattr(args, f"data_{name}", None) is not None
    }


def source_data_options(args: argparse.Namespace) -> Any:
    """The :class:`~vitlab.data.options.DataOptions` of a command that reads a model's images: the flags
    (:func:`add_data_options`) and ``--set data.FIELD=VALUE``."""
    from ..data.options import DataOptions

    sets = {k.removeprefix("data."): v for k, v in parse_overrides(args.set).items() if k.startswith("data.")}
    return DataOptions.from_dict(merge_settings(None, data_options(args), sets))


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
        help="foreign weights: a model config field they do not record, e.g. --set num_heads=3; or a data "
        "option as data.FIELD, e.g. --set data.crop_pct=0.9 (repeatable)",
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

    hints = {k: v for k, v in parse_overrides(args.set).items() if not k.startswith("data.")}
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


__all__ = ["parse_overrides", "read_config_file"]  # the settings every command reads (see vitlab.settings)
