"""``vitlab explore``: serve the interactive explorer on this machine and print its address."""

from __future__ import annotations

import argparse
import sys
from inspect import signature
from typing import TYPE_CHECKING, Any

from ..explore.images import MAX_PIXELS, MAX_SIDE, UPLOAD_LIMIT

if TYPE_CHECKING:
    from ..explore.app import ExploreConfig


def explore_config(args: argparse.Namespace) -> ExploreConfig:
    """The explorer's config the options ask for: each option is the :func:`~vitlab.explore.launch.launch_config`
    argument of its name."""
    from ..explore.launch import launch_config

    return launch_config(**{name: getattr(args, name) for name in signature(launch_config).parameters})


def run(args: argparse.Namespace) -> int:
    from ..errors import require

    for module in ("fastapi", "uvicorn", "multipart"):
        require(module, "explore", "vitlab explore")
    import uvicorn

    from ..explore import create_app
    from ..explore.launch import banner, exposure_warning
    from ..explore.serve import server_options

    config = explore_config(args)
    app = create_app(config)
    print("\n".join(banner(config, args.port)))
    warning = exposure_warning(config)
    if warning:
        print(warning, file=sys.stderr)
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
        dest="checkpoints",
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
        dest="allowed_hosts",
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
