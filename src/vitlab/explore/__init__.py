"""``vitlab explore``: the textbook's interactive figures on your own images, models and runs.

A local web app (FastAPI, served by uvicorn on 127.0.0.1) with six pages — Tokens, Attention,
Mechanics, Segment, Cost, Runs — whose every number comes from vitlab's functions on the server
(:mod:`vitlab.explore.pages.attention`, :mod:`vitlab.explore.pages.tokens`,
:mod:`vitlab.explore.pages.mechanics`, :mod:`vitlab.explore.pages.cost`, :mod:`vitlab.explore.pages.segment`,
:mod:`vitlab.explore.run_index`); the offline front end in ``static/`` only draws. It reads only the
checkpoints, run folders and data folder it was started with; what it refuses, and the tests that prove
it, are in SECURITY.md at the repository root.

    from vitlab.explore import ExploreConfig, create_app
    app = create_app(ExploreConfig(checkpoints=["runs/digits"], runs=["runs"]))
"""

from __future__ import annotations

from typing import Any

from .arrays import decode_array, encode_array

__all__ = ["ExploreConfig", "create_app", "decode_array", "encode_array", "serve_in_background"]


def __getattr__(name: str) -> Any:
    # The web framework loads on first use, so `vitlab --help` and the other commands stay quick.
    if name in ("ExploreConfig", "create_app"):
        from . import app

        return getattr(app, name)
    if name == "serve_in_background":
        from .serve import serve_in_background

        return serve_in_background
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
