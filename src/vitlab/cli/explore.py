"""``vitlab explore``: serve the interactive explorer on this machine and print its address."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from ..explore.images import MAX_SIDE, UPLOAD_LIMIT

if TYPE_CHECKING:
    from ..explore.app import ExploreConfig

DEFAULT_RUNS = Path("runs")


def explore_config(args: argparse.Namespace) -> "ExploreConfig":
    """The :class:`~vitlab.explore.ExploreConfig` the options ask for.

    Without ``--runs``, ``./runs`` is served if it exists. Another machine may connect only
    when ``--host`` names a non-loopback address.
    """
    from ..explore.app import LOOPBACK_HOSTS, ExploreConfig

    runs = args.runs if args.runs is not None else ([DEFAULT_RUNS] if DEFAULT_RUNS.is_dir() else [])
    missing = [str(r) for r in runs if not Path(r).is_dir()]
    if missing:
        raise FileNotFoundError(f"--runs {', '.join(missing)}: no such folder; pass the folder `vitlab compare` "
                                f"or `vitlab train` wrote into (e.g. runs)")
    if args.data_dir is not None and not Path(args.data_dir).is_dir():
        raise FileNotFoundError(f"--data-dir {args.data_dir}: no such folder")
    if args.upload_limit < 1:
        raise ValueError(f"--upload-limit must be a positive number of bytes, got {args.upload_limit}")
    hosts = list(LOOPBACK_HOSTS) if args.host in LOOPBACK_HOSTS else ["*"]
    return ExploreConfig(checkpoints=list(args.checkpoint), runs=list(runs), data_dir=args.data_dir,
                         upload_limit=args.upload_limit, max_side=args.max_side, allowed_hosts=hosts)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from ..explore import create_app

    config = explore_config(args)
    app = create_app(config)
    host = f"[{args.host}]" if ":" in args.host else args.host
    print(f"vitlab explore: http://{host}:{args.port}/  (Ctrl+C stops it)")
    print(f"  checkpoints: {', '.join(map(str, config.checkpoints)) or 'none (--checkpoint RUN_OR_FILE)'}")
    print(f"  runs:        {', '.join(map(str, config.runs)) or 'none (--runs DIR)'}")
    print(f"  data:        {config.data_dir or 'built-in samples only (--data-dir DIR for MNIST and others)'}")
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("explore", help="open the interactive explorer (tokens, attention, mechanics, cost, runs) "
                                       "in your browser")
    p.add_argument("--checkpoint", nargs="+", default=[], metavar="CKPT",
                   help="checkpoints to explain: run folders of `vitlab train`, checkpoint folders or "
                        ".safetensors files (vitlab, timm or Hugging Face ViTs)")
    p.add_argument("--runs", nargs="+", metavar="DIR",
                   help="run folders, or folders holding them, to list on the Runs page (default: ./runs if it exists)")
    p.add_argument("--data-dir", metavar="DIR", help="dataset files for samples that need them (MNIST IDX files, ...)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 opens it to the network)")
    p.add_argument("--upload-limit", type=int, default=UPLOAD_LIMIT, metavar="BYTES",
                   help=f"largest image file accepted (default {UPLOAD_LIMIT:,} bytes)")
    p.add_argument("--max-side", type=int, default=MAX_SIDE, metavar="PIXELS",
                   help=f"uploads are shrunk to this longest side (default {MAX_SIDE})")
    p.set_defaults(func=run)
