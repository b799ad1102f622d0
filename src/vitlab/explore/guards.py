"""What every request to the explorer passes before it reaches an endpoint (see SECURITY.md).

:class:`Guard` is one ASGI middleware applying, in this order:

1. **Host**: the ``Host`` header names the address the server is bound to (plus the loopback names
   when bound to loopback, any IP address when bound to all interfaces) and the port it listens
   on; anything else, which is what a DNS-rebinding page sends, is refused (400).
2. **Token** (when the config has one, always off loopback): the ``X-Vitlab-Token`` header or the
   cookie set by a first visit to ``/?token=...`` (which redirects to the same page without it);
   without it, 401.
3. **Origin**: a request other than GET / HEAD needs an ``Origin`` equal to this server's, or
   ``Sec-Fetch-Site: same-origin | none`` (browsers send both on the page's own fetch() calls);
   otherwise 403, so no other web page can post to the explorer.
4. **Body cap**: a request body over ``body_limit`` bytes is refused (413): at once when
   ``Content-Length`` says so, else as soon as the bytes read pass the cap (chunked uploads),
   before multipart parsing has written more than the cap anywhere.

:class:`SecurityHeaders` adds a Content-Security-Policy that allows this origin alone.
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import cookie_parser
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

TOKEN_HEADER = "x-vitlab-token"
TOKEN_QUERY = "token"
SAFE_METHODS = ("GET", "HEAD")
SAME_ORIGIN_FETCH = ("same-origin", "none")
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY_ADDRESS = ("0.0.0.0", "::", "[::]")
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data: blob:; script-src 'self'; "
    "style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def bracketed(host: str) -> str:
    """``host`` as a Host header writes it: lower case, an IPv6 address in brackets."""
    host = host.strip().lower()
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def is_ip_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address to bind) reaches this machine only."""
    name = host.strip().strip("[]").lower()
    return name == "localhost" or (is_ip_address(name) and ipaddress.ip_address(name).is_loopback)


def host_names(host: str, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """The names a ``Host`` header may carry for a server bound to ``host``: that address, the
    loopback names when it is loopback or all interfaces (then also this machine's name), and
    ``extra``."""
    names = {bracketed(host), *(bracketed(h) for h in extra)}
    if is_loopback(host) or bracketed(host) in ANY_ADDRESS:
        names.update(LOOPBACK_NAMES)
    if bracketed(host) in ANY_ADDRESS:
        names.add(socket.gethostname().lower())
    return frozenset(names)


def split_host(value: str) -> tuple[str, int | None] | None:
    """``"name:port"`` -> ``(name, port)`` (name lower case, IPv6 in brackets; port ``None`` if
    absent); ``None`` when it is not of that form."""
    value = value.strip().lower()
    name, sep, port = ("", "", "") if value.endswith("]") else value.rpartition(":")
    if not sep:
        name, port = value, ""
    if not name or (sep and not port.isdigit()) or (":" in name and not name.startswith("[")):
        return None
    return name, int(port) if port else None


class BodyTooLargeError(Exception):
    """Raised from ``receive`` once a request body passes the cap (caught by :class:`Guard`)."""


class Guard:
    """ASGI middleware: Host check, token, Origin check and body cap (see the module docstring).

    ``names``: Host names accepted (:func:`host_names`); ``any_ip``: also accept any IP address
    (bound to all interfaces: an address cannot be rebound by DNS); ``token``: required on every
    request when not ``None``; ``body_limit``: bytes of one request body.
    """

    def __init__(self, app: ASGIApp, names: frozenset[str], any_ip: bool, token: str | None, body_limit: int) -> None:
        self.app, self.names, self.any_ip, self.token, self.body_limit = app, names, any_ip, token, body_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # the explorer serves no websockets
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        response = self.refusal(scope, headers)
        if response is not None:
            await response(scope, receive, send)
            return
        await self.capped(scope, receive, send)

    def refusal(self, scope: Scope, headers: Headers) -> Response | None:
        """The answer refusing this request, or ``None`` when it may go on."""
        if not self.host_allowed(scope, headers.get("host", "")):
            return refuse(
                400,
                f"Host header {headers.get('host')!r} does not name this server: open the "
                f"address `vitlab explore` printed",
            )
        if self.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if TOKEN_QUERY in query and scope["method"] in SAFE_METHODS and self.is_token(query[TOKEN_QUERY]):
                return self.token_accepted(scope, query, self.token)
            if not (self.is_token(headers.get(TOKEN_HEADER)) or self.is_token(self.cookie(scope, headers))):
                return refuse(
                    401,
                    "this explorer needs its token: open the address `vitlab explore` printed "
                    "(http://HOST:PORT/?token=...) or send the X-Vitlab-Token header",
                )
        if scope["method"] not in SAFE_METHODS and not same_origin(scope, headers):
            return refuse(
                403,
                f"{scope['method']} from origin {headers.get('origin', 'unknown')!r} refused: "
                f"only the explorer's own page may change its state",
            )
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.body_limit:
            return too_large(self.body_limit)
        return None

    def host_allowed(self, scope: Scope, host: str) -> bool:
        parsed = split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        if name not in self.names and not (self.any_ip and is_ip_address(name)):
            return False
        server = scope.get("server")
        if server is None:  # a Unix socket: no port to compare
            return True
        return (port if port is not None else DEFAULT_PORTS.get(scope["scheme"])) == server[1]

    def is_token(self, given: str | None) -> bool:
        return (
            given is not None and self.token is not None and secrets.compare_digest(given.encode(), self.token.encode())
        )

    @staticmethod
    def cookie_name(scope: Scope) -> str:
        # Cookies ignore ports: one name per port keeps two explorers on one machine apart.
        server = scope.get("server")
        return f"vitlab_token_{server[1]}" if server else "vitlab_token"

    def cookie(self, scope: Scope, headers: Headers) -> str | None:
        return cookie_parser(headers.get("cookie", "")).get(self.cookie_name(scope))

    def token_accepted(self, scope: Scope, query: dict[str, str], token: str) -> Response:
        """The first visit with ``?token=``: set the cookie and reload the page without the token."""
        rest = urlencode({k: v for k, v in query.items() if k != TOKEN_QUERY})
        page = "/" + scope["path"].lstrip("/")  # never "//host": no redirect elsewhere
        response = Response(status_code=303, headers={"Location": page + (f"?{rest}" if rest else "")})
        response.set_cookie(self.cookie_name(scope), token, httponly=True, samesite="strict", path="/")
        return response

    async def capped(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the app, counting the body bytes it reads; answer 413 once they pass the cap."""
        read, started = 0, False

        async def counted_receive() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.body_limit:
                raise BodyTooLargeError
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLargeError:
            if started:
                raise
            await too_large(self.body_limit)(scope, receive, send)


def same_origin(scope: Scope, headers: Headers) -> bool:
    """Whether a browser says this request comes from the explorer's own page: ``Sec-Fetch-Site``
    is same-origin or none, or ``Origin`` is this server's scheme, host and port (as in ``Host``)."""
    site, origin = headers.get("sec-fetch-site"), headers.get("origin")
    if site is not None and site not in SAME_ORIGIN_FETCH:
        return False
    if origin is None:
        return site is not None
    parts = urlsplit(origin)
    theirs, ours = split_host(parts.netloc), split_host(headers.get("host", ""))
    if parts.scheme != scope["scheme"] or theirs is None or ours is None:
        return False
    default = DEFAULT_PORTS.get(parts.scheme)
    return (theirs[0], theirs[1] or default) == (ours[0], ours[1] or default)


def refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def too_large(limit: int) -> JSONResponse:
    return refuse(
        413,
        f"the request body is over the limit of {limit:,} bytes: send a smaller PNG or JPEG "
        f"(or start `vitlab explore --upload-limit` higher)",
    )


class SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every HTTP response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(SECURITY_HEADERS)
            await send(message)

        await self.app(scope, receive, send_with_headers)
