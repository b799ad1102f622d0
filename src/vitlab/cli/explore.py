"""``vitlab explore``: serve the interactive explorer on this machine and print its address."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from ..explore.images import MAX_PIXELS, MAX_SIDE, UPLOAD_LIMIT

if TYPE_CHECKING:
    from ..explore.app import ExploreConfig

DEFAULT_RUNS = Path("runs")


def explore_config(args: argparse.Namespace) -> ExploreConfig:
    """The :class:`~vitlab.explore.ExploreConfig` the options ask for.

    Without ``--runs``, ``./runs`` is served if it exists; without ``--checkpoint``, the trained
    classifiers found there (:func:`found_checkpoints`) are loaded. Another machine may connect only
    when ``--host`` names a non-loopback address, and then only with the token printed.
    """
    from ..explore.app import ExploreConfig

    runs = args.runs if args.runs is not None else ([DEFAULT_RUNS] if DEFAULT_RUNS.is_dir() else [])
    missing = [str(r) for r in runs if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(
            f"--runs {', '.join(missing)}: no such folder; pass the folder `vitlab compare` "
            f"or `vitlab train` wrote into (e.g. runs)"
        )
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {args.data_dir}: no such folder")
    if not 1 <= args.port <= 65535:
        raise ConfigError(f"--port must lie in [1, 65535], got {args.port}")
    checkpoints: list[str | Path] = list(args.checkpoint) or list(found_checkpoints(runs))
    return ExploreConfig(
        checkpoints=checkpoints,
        runs=list(runs),
        data_dir=args.data_dir,
        upload_limit=args.upload_limit,
        max_side=args.max_side,
        max_pixels=args.max_pixels,
        host=args.host,
        allowed_hosts=list(args.allow_host),
    )


def found_checkpoints(roots: list[str | Path]) -> list[Path]:
    """The classifier runs (``vitlab train``) among ``roots`` and their sub-folders that hold a
    checkpoint (``best/`` or ``last/``), in name order."""
    from ..runs.layout import BEST, LAST, WEIGHTS
    from ..runs.rundir import RunDir

    folders = [f for root in map(Path, roots) for f in (root, *sorted(p for p in root.iterdir() if p.is_dir()))]
    return [
        f
        for f in folders
        if RunDir(f).existing_kind() in ("classify", "an older vitlab run")
        and any((f / kept / WEIGHTS).is_file() for kept in (BEST, LAST))
    ]


def address(config: ExploreConfig, port: int) -> str:
    """The URL to open: ``http://HOST:PORT/``, with ``?token=...`` when the explorer needs one."""
    from ..explore.guards import bracketed

    return f"http://{bracketed(config.host)}:{port}/" + (f"?token={config.token}" if config.token else "")


def run(args: argparse.Namespace) -> int:
    from ..errors import require

    for module in ("fastapi", "uvicorn", "multipart"):
        require(module, "explore", "vitlab explore")
    import uvicorn

    from ..explore import create_app
    from ..explore.serve import server_options

    config = explore_config(args)
    app = create_app(config)
    print(f"vitlab explore: {address(config, args.port)}  (Ctrl+C stops it)")
    print(f"  checkpoints: {', '.join(map(str, config.checkpoints)) or 'none (--checkpoint RUN_OR_FILE)'}")
    print(f"  runs:        {', '.join(map(str, config.runs)) or 'none (--runs DIR)'}")
    print(f"  data:        {config.data_dir or 'built-in samples only (--data-dir DIR for MNIST and others)'}")
    if config.token:
        print(
            f"vitlab explore: WARNING: serving on {config.host}, which other machines can reach: every request "
            f"needs the token in the address above; whoever has it can read the checkpoints and runs given",
            file=sys.stderr,
        )
    # uvicorn's keyword arguments, each of its own type; the HTTP protocol holds the read timeouts and
    # connection limits (SECURITY.md)
    options: dict[str, Any] = server_options()
    uvicorn.run(app, host=args.host, port=args.port, **options)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "explore",
        help="open the interactive explorer (tokens, attention, forward pass, limits, mechanics, segment, cost, "
        "runs and training you can watch) in your browser",
    )
    p.add_argument(
        "--checkpoint",
        nargs="+",
        default=[],
        metavar="CKPT",
        help="checkpoints to explain: run folders of `vitlab train`, checkpoint folders or "
        ".safetensors files (vitlab, timm or Hugging Face ViTs)",
    )
    p.add_argument(
        "--runs",
        nargs="+",
        metavar="DIR",
        help="run folders, or folders holding them, to list on the Runs page (default: ./runs if it exists)",
    )
    p.add_argument("--data-dir", metavar="DIR", help="dataset files for samples that need them (MNIST IDX files, ...)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 opens it to the "
        "network, behind a token printed with the address)",
    )
    p.add_argument(
        "--allow-host",
        nargs="+",
        default=[],
        metavar="NAME",
        help="further names the browser may use for this server (e.g. its DNS name)",
    )
    p.add_argument(
        "--upload-limit",
        type=int,
        default=UPLOAD_LIMIT,
        metavar="BYTES",
        help=f"largest image file accepted (default {UPLOAD_LIMIT:,} bytes)",
    )
    p.add_argument(
        "--max-pixels",
        type=int,
        default=MAX_PIXELS,
        metavar="PIXELS",
        help=f"largest image accepted, width x height, checked before decoding (default {MAX_PIXELS:,})",
    )
    p.add_argument(
        "--max-side",
        type=int,
        default=MAX_SIDE,
        metavar="PIXELS",
        help=f"uploads are shrunk to this longest side (default {MAX_SIDE})",
    )
    p.set_defaults(func=run)
