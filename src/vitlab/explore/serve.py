"""Serve the explorer from a background thread: ``with serve_in_background(app) as url: ...``.

For notebooks, benchmarks and browser tests: uvicorn runs the app on a free loopback port in a
daemon thread of this process; leaving the block shuts it down. ``vitlab explore`` serves in the
foreground instead.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp

if TYPE_CHECKING:
    from .connections import ServerLimits

# uvicorn's settings for the explorer: quiet, no Server header, 503 past 64 open connections or requests.
SERVER_OPTIONS: dict[str, Any] = {"log_level": "warning", "server_header": False, "limit_concurrency": 64}


def server_options(limits: ServerLimits | None = None) -> dict[str, Any]:
    """uvicorn's keyword arguments for one explorer server: :data:`SERVER_OPTIONS` and, as its HTTP
    protocol, :func:`~vitlab.explore.connections.guarded_protocol` (header and body read timeouts,
    connections per client and in all; ``limits`` defaults to the explorer's own)."""
    from .connections import guarded_protocol

    return {**SERVER_OPTIONS, "http": guarded_protocol(limits)}


@contextmanager
def serve_in_background(app: ASGIApp, host: str = "127.0.0.1", limits: ServerLimits | None = None) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free port of ``host`` until the block ends; yields its base URL
    (``http://127.0.0.1:PORT``, no trailing slash). ``host`` must be the ``ExploreConfig.host`` the
    app was made with (the Host check follows it); ``limits`` are the connections' (the explorer's
    own by default, as ``vitlab explore`` serves it). Raises ``RuntimeError`` if the server dies starting."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **server_options(limits)))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        thread.join(0.02)
    if not server.started:
        raise RuntimeError(f"the explorer did not start on {host}:{port} (see uvicorn's log above)")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join()
