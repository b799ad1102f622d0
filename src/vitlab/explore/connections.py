"""The explorer's connections under load: read timeouts and per-client limits, in uvicorn's HTTP protocol.

uvicorn bounds the time between two requests on a connection (``timeout_keep_alive``) but not the
time a request takes to arrive: a client that sends its header or its body a byte at a time holds a
connection, and one of uvicorn's 64 slots, for as long as it likes. Nothing above the protocol can
see this (the ASGI app is called only once the header is complete), so the limits live in a small
subclass of uvicorn's h11 protocol, :func:`guarded_protocol`, passed to uvicorn as ``http=``:

- a request's line and headers must arrive within :data:`HEADER_TIMEOUT` seconds of its first byte
  (or of the connection's opening, so a connection that says nothing is closed too); past it the
  connection is answered 408 and closed;
- its body must arrive within :data:`BODY_TIMEOUT` seconds of the header's end; past it the
  connection is closed (the app reading it sees the client gone);
- one client address holds at most :data:`PER_CLIENT_CONNECTIONS` connections and all clients
  together :data:`MAX_CONNECTIONS`; a connection beyond either is answered 503 at once and closed,
  never queued.

The timers follow h11's own state of the request (``their_state``), so they hold on every
connection, keep-alive and pipelined requests included, and cost nothing but one timer handle.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from ..errors import ConfigError
from .guards import SECURITY_HEADERS

HEADER_TIMEOUT = 5.0  # seconds for a request's line and headers, from its first byte
BODY_TIMEOUT = 10.0  # seconds for a request's body, from the end of its header (8 MiB needs ~0.8 MiB/s)
PER_CLIENT_CONNECTIONS = 16  # open connections of one client address (a browser opens 6 per host)
MAX_CONNECTIONS = 64  # open connections of all clients together
REFUSED_LINGER = 1.0  # seconds a refused connection stays open for its 503 to be read


@dataclass(frozen=True)
class ServerLimits:
    """How long a request may take to arrive and how many connections are served at once."""

    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    per_client: int = PER_CLIENT_CONNECTIONS
    total: int = MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if not (self.header_timeout > 0 and self.body_timeout > 0 and self.per_client >= 1 and self.total >= 1):
            raise ConfigError(f"server limits must be positive, got {self}")


class ConnectionGate:
    """Counts the open connections of each client address; admits one while both limits allow."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self.open: Counter[str] = Counter()
        self._lock = threading.Lock()  # the event loop's thread only, but cheap and safe for readers

    def admit(self, client: str) -> str | None:
        """Count a new connection of ``client`` and return ``None``, or return why it is refused."""
        with self._lock:
            if sum(self.open.values()) >= self.limits.total:
                return f"the explorer serves {self.limits.total} connections at once: try again in a moment"
            if self.open[client] >= self.limits.per_client:
                return (
                    f"{self.limits.per_client} connections from {client} are open already: "
                    f"close some or try again in a moment"
                )
            self.open[client] += 1
            return None

    def release(self, client: str) -> None:
        with self._lock:
            self.open[client] -= 1
            if self.open[client] <= 0:
                del self.open[client]


def plain_response(status: int, reason: str, message: str) -> bytes:
    """A complete HTTP/1.1 response that closes the connection: ``message`` as text, the security headers."""
    body = (message + "\n").encode()
    headers = {
        "content-type": "text/plain; charset=utf-8",
        "content-length": str(len(body)),
        "connection": "close",
        **SECURITY_HEADERS,
    }
    head = f"HTTP/1.1 {status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode("latin-1") + b"\r\n" + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with :class:`ServerLimits`: read timeouts and per-client connection limits.

    Made by :func:`guarded_protocol`, which gives each server its own :class:`ConnectionGate`."""

    gate: ClassVar[ConnectionGate]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.limits = self.gate.limits
        self.address = ""
        self.admitted = False
        self.phase: str | None = None  # "header" or "body" while its timer runs
        self.timer: asyncio.TimerHandle | None = None

    # -- the connection --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.address = self.client[0] if self.client else ""
        refused = self.gate.admit(self.address)
        if refused is not None:
            self.logger.warning("refused a connection from %s: %s", self.address, refused)
            transport.write(plain_response(503, "Service Unavailable", refused))
            self.phase = "refused"
            self.timer = self.loop.call_later(REFUSED_LINGER, self.transport.close)
            return
        self.admitted = True
        self.arm("header", self.limits.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self.disarm()
        if self.admitted:
            self.admitted = False
            self.gate.release(self.address)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.phase == "refused":  # its 503 is written: what it sent is read, so closing resets nothing
            self.disarm()
            self.transport.close()
            return
        if self.conn.their_state is h11.IDLE and self.phase != "header":
            self.arm("header", self.limits.header_timeout)  # the first byte of a request
        super().data_received(data)
        self.follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.follow()
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0] and self.phase is None:
            self.arm("header", self.limits.header_timeout)  # part of a pipelined request is waiting

    # -- the timers ------------------------------------------------------------------------------

    def follow(self) -> None:
        """Move the timer along with the request h11 is reading: header, body, or none once it is in."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self.phase != "body":
                self.arm("body", self.limits.body_timeout)
        elif state is not h11.IDLE:
            self.disarm()  # the request is in (or the connection is closing): the app's time is its own

    def arm(self, phase: str, seconds: float) -> None:
        self.disarm()
        self.phase = phase
        self.timer = self.loop.call_later(seconds, self.expired)

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.phase = None, None

    def expired(self) -> None:
        phase, self.timer, self.phase = self.phase, None, None
        if self.transport.is_closing():
            return
        seconds = self.limits.header_timeout if phase == "header" else self.limits.body_timeout
        self.logger.warning("closed a connection from %s: its %s took over %g s", self.address, phase, seconds)
        if phase == "header" and self.conn.our_state is h11.IDLE:
            self.transport.write(
                plain_response(408, "Request Timeout", f"the request's header took over {seconds:g} s to arrive")
            )
        self.transport.close()


def guarded_protocol(limits: ServerLimits | None = None) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` class with its own connection counts, for one server (``http=``)."""
    gate = ConnectionGate(limits or ServerLimits())
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"gate": gate})
