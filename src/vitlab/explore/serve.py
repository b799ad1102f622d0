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
from typing import Any

from starlette.types import ASGIApp

# uvicorn's settings for the explorer: quiet, no Server header, 503 past 64 open connections.
SERVER_OPTIONS: dict[str, Any] = {"log_level": "warning", "server_header": False, "limit_concurrency": 64}


@contextmanager
def serve_in_background(app: ASGIApp, host: str = "127.0.0.1") -> Iterator[str]:
    """Run ``app`` with uvicorn on a free port of ``host`` until the block ends; yields its base URL
    (``http://127.0.0.1:PORT``, no trailing slash). ``host`` must be the ``ExploreConfig.host`` the
    app was made with (the Host check follows it). Raises ``RuntimeError`` if the server dies starting."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind((host, 0))
        port = probe.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, **SERVER_OPTIONS))
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
