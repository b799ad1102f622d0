"""The explorer under load (SECURITY.md): slow headers and bodies cut off at their timeouts, connections
limited per client and in all, sample splits loaded once per source and kept under a byte cap.

Every test serves the real explorer with uvicorn on a free loopback port (`serve_in_background`, the
protocol `vitlab explore` serves with) and talks to it over raw sockets; other clients are other
loopback addresses (127.0.0.2, 127.0.0.3). Each test ends by itself within a few seconds.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn

from vitlab.cli.main import main
from vitlab.explore import ExploreConfig, create_app, serve_in_background
from vitlab.explore import images as explore_images
from vitlab.explore.cache import LoadOnce, LoadTimeoutError
from vitlab.explore.connections import (
    BODY_TIMEOUT,
    HEADER_TIMEOUT,
    MAX_CONNECTIONS,
    PER_CLIENT_CONNECTIONS,
    GuardedH11Protocol,
    ServerLimits,
)
from vitlab.explore.serve import server_options

SLACK = 2.0  # seconds the server may take past a timeout to close (the loop's timer, a busy CI machine)


@pytest.fixture(scope="module")
def explorer():
    """The explorer with no checkpoints or runs (its first sample sources loaded)."""
    return create_app(ExploreConfig())


def connect(url: str, source: str = "127.0.0.1") -> socket.socket:
    """A socket to the server at ``url`` from loopback address ``source``."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(5)
    sock.connect((host, int(port)))
    return sock


def request(url: str, path: str = "/api/info", source: str = "127.0.0.1") -> bytes:
    """A GET of ``path`` from ``source``: the whole answer (the server closes after it)."""
    netloc = url.removeprefix("http://")
    with connect(url, source) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {netloc}\r\nConnection: close\r\n\r\n".encode())
        return read_all(sock)


def read_all(sock: socket.socket) -> bytes:
    answer = b""
    try:
        while part := sock.recv(65536):
            answer += part
    except ConnectionResetError:
        pass
    return answer


def trickle(sock: socket.socket, data: bytes, every: float, limit: float) -> tuple[float, bytes]:
    """Send ``data`` a byte every ``every`` seconds (over and over) until the server closes the connection,
    at most ``limit`` seconds; returns the seconds it stayed open and what the server answered."""
    start, answer, sent = time.monotonic(), b"", 0
    sock.settimeout(every)
    while time.monotonic() - start < limit:
        try:
            sock.sendall(data[sent % len(data) : sent % len(data) + 1])
            sent += 1
        except (BrokenPipeError, ConnectionResetError):
            break
        try:
            part = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            break
        if not part:
            break
        answer += part
    return time.monotonic() - start, answer


def test_the_explorer_is_served_with_its_limits(tmp_path, monkeypatch):
    served: dict = {}
    monkeypatch.chdir(tmp_path)  # no ./runs: nothing to load
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(options))
    assert main(["explore", "--port", "8125"]) == 0
    assert issubclass(served["http"], GuardedH11Protocol) and served["limit_concurrency"] == MAX_CONNECTIONS
    limits = served["http"].gate.limits
    assert limits == ServerLimits(HEADER_TIMEOUT, BODY_TIMEOUT, PER_CLIENT_CONNECTIONS, MAX_CONNECTIONS)
    assert (HEADER_TIMEOUT, BODY_TIMEOUT, PER_CLIENT_CONNECTIONS, MAX_CONNECTIONS) == (5.0, 10.0, 16, 64)
    # each server counts its own connections
    assert server_options()["http"].gate is not server_options()["http"].gate


def test_a_header_sent_byte_by_byte_is_cut_off_at_the_header_timeout(explorer):
    with serve_in_background(explorer) as url:
        netloc = url.removeprefix("http://")
        slow, silent = connect(url), connect(url)
        with slow, silent:
            header = f"GET /api/info HTTP/1.1\r\nHost: {netloc}\r\n".encode() + b"X-Slow: " + b"a" * 4000
            opened, answer = trickle(slow, header, 0.2, HEADER_TIMEOUT + 2 * SLACK)
            assert HEADER_TIMEOUT - 0.5 <= opened <= HEADER_TIMEOUT + SLACK, opened
            assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
            silent.settimeout(SLACK)  # it said nothing for as long: closed by now
            assert silent.recv(65536).startswith(b"HTTP/1.1 408")
        # a header that arrives slowly but in time is served, and so is everyone else meanwhile
        with connect(url) as steady:
            whole = f"GET /api/info HTTP/1.1\r\nHost: {netloc}\r\nConnection: close\r\n\r\n".encode()
            for byte in whole[:-1]:
                steady.sendall(bytes([byte]))
                time.sleep(1.0 / len(whole))
            assert request(url).startswith(b"HTTP/1.1 200")
            steady.sendall(whole[-1:])
            assert read_all(steady).startswith(b"HTTP/1.1 200")


def test_a_body_sent_byte_by_byte_is_cut_off_at_the_body_timeout(explorer):
    body_timeout = 2.0  # the explorer's own is BODY_TIMEOUT (above); this keeps the test short
    with serve_in_background(explorer, limits=ServerLimits(body_timeout=body_timeout)) as url:
        netloc = url.removeprefix("http://")
        with connect(url) as sock:
            sock.sendall(
                f"POST /api/uploads HTTP/1.1\r\nHost: {netloc}\r\nOrigin: {url}\r\nContent-Length: 100000\r\n"
                f"Content-Type: multipart/form-data; boundary=b0undary\r\n\r\n".encode()
            )
            opened, answer = trickle(sock, b"--b0undary\r\n", 0.1, body_timeout + 2 * SLACK)
            assert body_timeout - 0.5 <= opened <= body_timeout + SLACK, (opened, answer[:200])
            assert not answer.startswith(b"HTTP/1.1 2"), answer[:200]
        assert request(url).startswith(b"HTTP/1.1 200")


def test_one_client_gets_at_most_its_connections_while_another_is_served(explorer):
    with serve_in_background(explorer) as url:
        held = [connect(url) for _ in range(PER_CLIENT_CONNECTIONS)]
        try:
            for sock in held:
                sock.sendall(b"GET / HTTP/1.1\r\n")  # an unfinished header (cut off in HEADER_TIMEOUT)
            refused = request(url)
            assert refused.startswith(b"HTTP/1.1 503"), refused[:200]
            assert f"{PER_CLIENT_CONNECTIONS} connections from 127.0.0.1".encode() in refused
            assert b"Content-Security-Policy" in refused or b"content-security-policy" in refused
            assert request(url, source="127.0.0.2").startswith(b"HTTP/1.1 200")
        finally:
            for sock in held:
                sock.close()
        deadline = time.monotonic() + SLACK  # the server sees them closed a moment later
        while not (answer := request(url)).startswith(b"HTTP/1.1 200") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def test_all_clients_together_get_at_most_the_total(explorer):
    with serve_in_background(explorer, limits=ServerLimits(per_client=2, total=3)) as url:
        held = [connect(url), connect(url), connect(url, "127.0.0.2")]
        try:
            for sock in held:
                sock.sendall(b"GET / HTTP/1.1\r\n")
            refused = request(url, source="127.0.0.3")
            assert refused.startswith(b"HTTP/1.1 503") and b"3 connections at once" in refused, refused[:200]
        finally:
            for sock in held:
                sock.close()


def test_twelve_concurrent_cold_loads_of_one_source_run_one_load(monkeypatch):
    loaded: list[str] = []
    real_load = explore_images.load_dataset

    def counting_load(name, *args, **kwargs):
        loaded.append(name)
        time.sleep(0.5)  # long enough for all twelve requests to arrive while it runs
        return real_load(name, *args, **kwargs)

    monkeypatch.setattr(explore_images, "load_dataset", counting_load)
    synthetic = explore_images.split_bytes(real_load("synthetic").test)
    digits = explore_images.split_bytes(real_load("digits").test)
    cap = synthetic + digits - 1  # room for one of them, not both
    monkeypatch.setattr(explore_images, "SAMPLE_CACHE_BYTES", cap)
    app = create_app(ExploreConfig())  # loads its first sources (digits among them), not synthetic
    cache = app.state.context.book.splits
    assert "synthetic" not in cache.keys() and cache.nbytes <= cap
    with serve_in_background(app) as url:
        start, answers = threading.Barrier(12), [b""] * 12

        def ask(i: int) -> None:
            start.wait(5)
            answers[i] = request(url, "/api/samples/synthetic?count=2")

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert all(a.startswith(b"HTTP/1.1 200") for a in answers), [a[:100] for a in answers]
        bodies = {json.dumps(json.loads(a.split(b"\r\n\r\n", 1)[1])) for a in answers}
        assert len(bodies) == 1 and loaded.count("synthetic") == 1, loaded
        # the cap holds: synthetic in, digits (least recently used) out; asked again, digits is loaded again
        assert cache.keys() == ["synthetic"] and cache.nbytes == synthetic <= cap
        assert request(url, "/api/samples/digits?count=2").startswith(b"HTTP/1.1 200")
        assert cache.keys() == ["digits"] and cache.nbytes == digits <= cap
        assert loaded.count("digits") == 2 and loaded.count("synthetic") == 1


def test_a_failed_load_reaches_every_waiter_and_loads_are_bounded():
    cache: LoadOnce[bytes] = LoadOnce(cap=35, size=len, slots=2, wait=5.0)
    running, most, calls = [0], [0], []
    lock = threading.Lock()

    def load(key: str) -> bytes:
        with lock:
            calls.append(key)
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.2)
        with lock:
            running[0] -= 1
        if key == "bad":
            raise ValueError("no such source")
        return key.encode() * 10

    results: dict[int, object] = {}
    keys = ["bad"] * 6 + ["a", "b", "c", "d", "e", "f"]

    def ask(i: int) -> None:
        try:
            results[i] = cache.get(keys[i], lambda: load(keys[i]))
        except ValueError as err:
            results[i] = err

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(keys))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert calls.count("bad") == 1 and all(isinstance(results[i], ValueError) for i in range(6))
    assert "bad" not in cache.keys() and most[0] <= 2  # different keys: two loads at a time
    assert cache.nbytes <= 35 and len(cache.keys()) == 3  # six values of 10 bytes under a cap of 35
    slow: LoadOnce[bytes] = LoadOnce(cap=100, size=len, slots=1, wait=0.2)
    blocker = threading.Thread(target=slow.get, args=("x", lambda: time.sleep(1) or b"x"))
    blocker.start()
    time.sleep(0.05)
    with pytest.raises(LoadTimeoutError):
        slow.get("x", lambda: b"x")  # waits for the one load of x, not past its wait
    blocker.join(5)
