"""What the explorer refuses (SECURITY.md): hostile uploads (formats, bytes, pixels, too many at once),
paths leaving the runs root, broken run folders hiding others, foreign hosts and origins, requests
without the token off loopback, and CDNs."""

import io
import json
import os
import random
import re
import socket
import struct
import threading
import zlib
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from vitlab.explore import ExploreConfig, create_app, decode_array, serve_in_background
from vitlab.explore import images as explore_images
from vitlab.explore.app import MULTIPART_SLACK

SECRET = "SECRET-7f3a"  # in every file outside the runs root; must never be served


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def upload(client, data: bytes, name: str = "picture.png", mime: str = "image/png", **kwargs):
    return client.post("/api/uploads", files={"file": (name, data, mime)}, **kwargs)


def png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bomb(width: int, height: int) -> bytes:
    """A valid PNG header declaring ``width x height`` RGB pixels, followed by a few bytes of data."""
    header = png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    return b"\x89PNG\r\n\x1a\n" + header + png_chunk(b"IDAT", zlib.compress(b"\0" * 64)) + png_chunk(b"IEND", b"")


# -- uploads ---------------------------------------------------------------------------------------


def test_png_upload_decodes_to_the_same_pixels_and_can_be_tokenised(client):
    pixels = np.random.default_rng(0).integers(0, 256, (12, 20, 3), dtype=np.uint8)
    response = upload(client, encoded(Image.fromarray(pixels), "PNG"))
    assert response.status_code == 200, response.text
    answer = response.json()
    assert (answer["channels"], answer["height"], answer["width"]) == (3, 12, 20)
    np.testing.assert_allclose(decode_array(answer["image"]), pixels.transpose(2, 0, 1) / 255.0, atol=1e-7)
    tokens = client.get("/api/tokens", params={"ref": answer["ref"], "patch": 4}).json()
    assert tokens["tokens"] == 15 and tokens["token_width"] == 48


def test_jpeg_and_greyscale_uploads_are_accepted_and_large_ones_shrunk(client):
    grey = Image.fromarray(np.full((600, 300), 128, dtype=np.uint8))
    answer = upload(client, encoded(grey, "JPEG"), "scan.jpg", "image/jpeg").json()
    assert (answer["channels"], answer["height"], answer["width"]) == (1, 224, 112)
    colour = np.array([200, 120, 40], dtype=np.uint8)
    photo = Image.fromarray(np.broadcast_to(colour, (1800, 2400, 3)).copy())  # decoded at 1/8 scale
    answer = upload(client, encoded(photo, "JPEG"), "photo.jpg", "image/jpeg").json()
    assert (answer["channels"], answer["height"], answer["width"]) == (3, 168, 224)
    np.testing.assert_allclose(
        decode_array(answer["image"]), np.broadcast_to((colour / 255)[:, None, None], (3, 168, 224)), atol=3 / 255
    )
    grey_rgb = Image.fromarray(np.full((40, 40, 3), 90, dtype=np.uint8))  # a grey picture saved as RGB: read as grey
    assert upload(client, encoded(grey_rgb, "PNG"), "canvas.png", "image/png").json()["channels"] == 1


@pytest.mark.parametrize(
    "data, words",
    [
        (encoded(Image.new("RGB", (8, 8)), "GIF"), "PNG or JPEG"),
        (encoded(Image.new("RGB", (8, 8)), "BMP"), "PNG or JPEG"),
        (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "PNG or JPEG"),
        (encoded(Image.new("RGB", (8, 8)), "PNG")[:40], "PNG or JPEG"),
        (b"", "empty"),
    ],
)
def test_other_files_are_refused_with_a_clear_message(client, data, words):
    response = upload(client, data)
    assert response.status_code == 415 and words in response.json()["error"]


def test_size_and_pixel_limits_follow_the_config(runs_root):
    small = TestClient(
        create_app(ExploreConfig(upload_limit=2000, max_pixels=110)),
        base_url="http://127.0.0.1",
        headers={"origin": "http://127.0.0.1"},
    )
    noise = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    response = upload(small, encoded(Image.fromarray(noise), "PNG"))
    assert response.status_code == 413 and "2,000" in response.json()["error"]
    assert upload(small, encoded(Image.new("L", (11, 10)), "PNG")).status_code == 200
    response = upload(small, encoded(Image.new("L", (12, 10)), "PNG"))
    assert response.status_code == 413 and "12x10" in response.json()["error"]


@pytest.mark.parametrize("width, height", [(6300, 6300), (4097, 4096), (1, 20_000_000), (100_000, 100_000)])
def test_pixel_bombs_are_refused_from_their_header_before_decoding(client, width, height):
    # The data behind each header is a few bytes: decoding would fail (415); 413 shows the header was judged first.
    response = upload(client, png_bomb(width, height))
    assert response.status_code == 413, response.text
    assert "pixels" in response.json()["error"] and f"{explore_images.MAX_PIXELS:,}" in response.json()["error"]


def test_random_and_mutated_files_get_a_clean_refusal(client):
    rng = random.Random(0)
    pixels = np.random.default_rng(2).integers(0, 256, (24, 24, 3), dtype=np.uint8)
    seeds = [encoded(Image.fromarray(pixels), fmt) for fmt in ("PNG", "JPEG")]
    for trial in range(90):
        kind = trial % 3
        if kind == 0:
            data = rng.randbytes(rng.randint(1, 3000))
        elif kind == 1:
            data = b"\x89PNG\r\n\x1a\n" + rng.randbytes(rng.randint(0, 3000))
        else:
            mutated = bytearray(rng.choice(seeds))
            for _ in range(rng.randint(1, 12)):
                mutated[rng.randrange(len(mutated))] = rng.randrange(256)
            data = bytes(mutated[: rng.randint(len(mutated) // 2, len(mutated))])
        response = upload(client, data)
        assert response.status_code == 200 or 400 <= response.status_code < 500, (trial, response.text)
        if response.status_code != 200:
            assert response.json()["error"], trial
        if kind < 2:
            assert response.status_code == 415, (trial, response.text)


@pytest.mark.slow
def test_uploads_decode_at_most_a_few_at_a_time(client, monkeypatch):
    decode, state, lock = explore_images.decode_upload, {"now": 0, "peak": 0}, threading.Lock()

    def slow_decode(*args):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        try:
            threading.Event().wait(0.1)  # long enough for the others to arrive
            return decode(*args)
        finally:
            with lock:
                state["now"] -= 1

    monkeypatch.setattr(explore_images, "decode_upload", slow_decode)
    picture = encoded(Image.new("RGB", (8, 8)), "PNG")
    statuses = []
    threads = [threading.Thread(target=lambda: statuses.append(upload(client, picture).status_code)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [200] * 8 and 1 <= state["peak"] <= explore_images.DECODE_SLOTS


def test_an_upload_waiting_too_long_for_a_decode_slot_is_refused_503(client, monkeypatch):
    decode, inside, release = explore_images.decode_upload, threading.Semaphore(0), threading.Event()

    def held_decode(*args):
        inside.release()
        release.wait(30)
        return decode(*args)

    monkeypatch.setattr(explore_images, "decode_upload", held_decode)
    monkeypatch.setattr(explore_images, "DECODE_WAIT", 0.05)
    picture = encoded(Image.new("RGB", (8, 8)), "PNG")
    statuses = []
    holders = [
        threading.Thread(target=lambda: statuses.append(upload(client, picture).status_code))
        for _ in range(explore_images.DECODE_SLOTS)
    ]
    for t in holders:
        t.start()
    for _ in holders:
        assert inside.acquire(timeout=30)
    try:
        response = upload(client, picture)
        assert response.status_code == 503 and "try again" in response.json()["error"]
    finally:
        release.set()
        for t in holders:
            t.join()
    assert statuses == [200] * explore_images.DECODE_SLOTS


def test_upload_needs_the_file_field(client):
    response = client.post("/api/uploads", data={"other": "x"})
    assert response.status_code == 400 and "'file'" in response.json()["error"]


# -- request bodies: the byte cap while reading ----------------------------------------------------


class CountingApp:
    """ASGI wrapper counting the request-body bytes the explorer read."""

    def __init__(self, app) -> None:
        self.app, self.read = app, 0

    async def __call__(self, scope, receive, send):
        async def counted():
            message = await receive()
            self.read += len(message.get("body", b""))
            return message

        await self.app(scope, counted, send)


def send_request(url: str, head: list[str], chunks, limit_sent: int) -> tuple[bytes, int]:
    """Send a raw HTTP/1.1 request (``head`` lines, then ``chunks`` until the server answers or
    ``limit_sent`` bytes went out) to the server at ``url``; returns its answer and the bytes sent."""
    host, port = url.removeprefix("http://").split(":")
    sent = 0
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        sock.setblocking(False)
        try:
            for chunk in chunks:
                if sent >= limit_sent:
                    break
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break  # the server has answered
                except BlockingIOError:
                    pass
                sock.settimeout(30)
                sock.sendall(chunk)
                sock.setblocking(False)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.settimeout(30)
        answer = b""
        try:
            while b"\r\n\r\n" not in answer and (part := sock.recv(65536)):
                answer += part
        except ConnectionResetError:
            pass
    return answer, sent


@pytest.fixture(scope="module")
def capped_server():
    """A real uvicorn serving an explorer whose uploads are capped at 100 kB, counting what it reads."""
    counting = CountingApp(create_app(ExploreConfig(upload_limit=100_000)))
    with serve_in_background(counting) as url:
        yield url, counting


def upload_head(url: str, length_header: str) -> list[str]:
    netloc = url.removeprefix("http://")
    return [
        "POST /api/uploads HTTP/1.1",
        f"Host: {netloc}",
        f"Origin: {url}",
        length_header,
        "Content-Type: multipart/form-data; boundary=b0undary",
    ]


def test_a_chunked_upload_is_cut_off_at_the_cap_while_it_is_read(capped_server):
    url, counting = capped_server
    counting.read = 0
    cap, piece = 100_000 + MULTIPART_SLACK, 64 * 1024
    preamble = (
        b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\n'
        b"Content-Type: image/png\r\n\r\n"
    )

    def chunks():
        yield b"%x\r\n%s\r\n" % (len(preamble), preamble)
        while True:
            yield b"%x\r\n%s\r\n" % (piece, b"\0" * piece)

    answer, sent = send_request(url, upload_head(url, "Transfer-Encoding: chunked"), chunks(), 64 * 2**20)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    # uvicorn hands over what one socket read brought (up to 256 kB): the cap plus that, not the 64 MB offered
    assert counting.read <= cap + 2**19, (counting.read, sent)


def test_a_content_length_over_the_cap_is_refused_before_reading(capped_server):
    url, counting = capped_server
    counting.read = 0
    answer, _ = send_request(url, upload_head(url, "Content-Length: 400000000"), iter([b"\0" * 1000]), 0)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert counting.read == 0


def test_a_body_over_the_cap_is_refused_on_any_endpoint(client):
    body = b"\0" * (explore_images.UPLOAD_LIMIT + MULTIPART_SLACK + 1)
    for path in ("/api/uploads", "/api/info"):
        response = client.post(path, content=body)
        assert response.status_code == 413 and "bytes" in response.json()["error"], path


# -- paths: nothing outside the runs root, through links or otherwise ------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/..%2F..%2Fetc/figures/passwd",
        "/api/runs/study/figures/..%2Fdigits-vit%2Fsummary.json",
        "/api/runs/study/figures/%2E%2E%2F%2E%2E%2Fetc%2Fpasswd",
        "/api/runs/study/figures/report.md",
        "/api/runs/study/figures/results.json",
        "/api/runs/..",
        "/api/runs/%2E%2E",
        "/static/..%2F..%2Fapp.py",
        "/static/%2E%2E/app.py",
        "/static/../explore/app.py",
    ],
)
def test_path_traversal_is_refused(client, path):
    response = client.get(path)
    assert response.status_code in (400, 404), (path, response.status_code)
    assert b"import" not in response.content and b"root:" not in response.content


def write(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def lines(*records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


EPOCHS = lines(
    {"epoch": 1, "train_acc": 0.5, "val_acc": 0.6, "val_loss": 1.0, "seconds": 2.0},
    {"epoch": 2, "train_acc": 0.7, "val_acc": 0.8, "val_loss": 0.5, "seconds": 2.0},
)
STUDY = json.dumps(
    {
        "config": {"vit": "vit-tiny", "cnn": "resnet", "dataset": "digits", "epochs": 1},
        "runs": [
            {"label": "vit", "axes": {"patch": 2}, "best_val_acc": 0.9, "params": 10, "curves": {"val_acc": [0.5, 0.9]}}
        ],
        "conclusions": ["vit wins"],
    }
)
PNG = encoded(Image.new("RGB", (4, 4)), "PNG")

# name -> (status of /api/runs/{name}, words its reason holds); 200: it is served as usual
RUNS = {
    "good-train": (200, ""),
    "good-study": (200, ""),
    "link-inside": (200, ""),  # a folder link that stays in the root
    "odd-numbers": (200, ""),  # NaN, infinities, 400-digit numbers, 1e308
    "list-results": (422, "results.json"),
    "text-results": (409, "results.json"),
    "binary-results": (422, "UTF-8"),
    "runs-not-list": (422, "'runs'"),
    "curves-not-list": (422, "curves"),
    "conclusions-not-list": (422, "conclusions"),
    "deep-results": (422, "deep"),
    "deeper-results": (422, "deep"),
    "list-line": (422, "line 2 of metrics.jsonl"),
    "text-line": (409, "line 1 of metrics.jsonl"),
    "summary-number": (422, "summary.json"),
    "test-not-object": (422, "'test'"),
    "config-folder": (422, "config.json"),
    "fifo-metrics": (422, "regular file"),
    "link-config": (403, "config.json"),
    "link-results": (403, "results.json"),
    "link-summary": (403, "summary.json"),
    "link-metrics": (403, "metrics.jsonl"),
    "link-chain": (403, "results.json"),
}


@pytest.fixture(scope="module")
def zoo(tmp_path_factory) -> Path:
    """A runs root of good, broken and linked run folders (see RUNS), and files outside it."""
    base = tmp_path_factory.mktemp("zoo")
    root, outside = base / "runs", base / "outside"
    write(
        outside / "secret.json",
        json.dumps({"model": SECRET, "best_val_acc": 0.99, "runs": [], "config": {"vit": SECRET}}),
    )
    write(outside / "metrics.jsonl", lines({"epoch": 1, "val_acc": 0.99, "note": SECRET}))
    write(outside / "secret.png", PNG + SECRET.encode())
    write(outside / "report.md", SECRET)
    write(outside / "run" / "results.json", (outside / "secret.json").read_text())
    write(root / "good-train" / "metrics.jsonl", EPOCHS)
    write(root / "good-train" / "summary.json", json.dumps({"best_val_acc": 0.8, "test": {"acc": 0.75}}))
    write(root / "good-train" / "config.json", json.dumps({"model": "vit-digits", "dataset": "digits"}))
    write(root / "good-study" / "results.json", STUDY)
    write(root / "good-study" / "report.md", "# study")
    write(root / "good-study" / "curves.png", PNG)
    (root / "good-study" / "leak.png").symlink_to(outside / "secret.png")
    (root / "good-train" / "report.md").symlink_to(outside / "report.md")
    (root / "link-inside").symlink_to(root / "good-train", target_is_directory=True)
    (root / "link-folder").symlink_to(outside / "run", target_is_directory=True)
    write(
        root / "odd-numbers" / "metrics.jsonl",
        '{"epoch": 1, "val_acc": NaN, "val_loss": Infinity, "seconds": 1e999}\n'
        f'{{"epoch": 2, "val_acc": 1e308, "val_loss": -Infinity, "seconds": {"9" * 400}}}\n'
        '{"epoch": 3, "val_acc": -1e308, "val_loss": 0.5, "seconds": 1}\n',
    )
    write(root / "list-results" / "results.json", "[1, 2, 3]")
    write(root / "text-results" / "results.json", '{"runs": [')
    write(root / "binary-results" / "results.json", b"\xff\xfe{\x00")
    write(root / "runs-not-list" / "results.json", '{"runs": "x"}')
    write(root / "curves-not-list" / "results.json", '{"runs": [{"curves": {"val_acc": 5}}]}')
    write(root / "conclusions-not-list" / "results.json", '{"conclusions": {"a": 1}}')
    write(root / "deep-results" / "results.json", "[" * 100_000 + "]" * 100_000)
    write(root / "deeper-results" / "results.json", '{"config": ' + "[" * 200 + "]" * 200 + "}")
    write(root / "list-line" / "metrics.jsonl", '{"epoch": 1}\n[1, 2]\n')
    write(root / "text-line" / "metrics.jsonl", "epoch 1 done\n")
    write(root / "summary-number" / "summary.json", "3")
    write(root / "test-not-object" / "summary.json", '{"test": [0.5]}')
    write(root / "config-folder" / "summary.json", "{}")
    (root / "config-folder" / "config.json").mkdir()
    write(root / "fifo-metrics" / "summary.json", "{}")
    os.mkfifo(root / "fifo-metrics" / "metrics.jsonl")
    write(root / "link-config" / "summary.json", "{}")
    for name, file, target in [
        ("link-config", "config.json", "secret.json"),
        ("link-results", "results.json", "secret.json"),
        ("link-summary", "summary.json", "secret.json"),
        ("link-metrics", "metrics.jsonl", "metrics.jsonl"),
    ]:
        (root / name).mkdir(exist_ok=True)
        (root / name / file).symlink_to(outside / target)
    (root / "relay.json").symlink_to(outside / "secret.json")
    (root / "link-chain").mkdir()
    (root / "link-chain" / "results.json").symlink_to(root / "relay.json")
    return root


@pytest.fixture(scope="module")
def zoo_client(zoo) -> TestClient:
    return TestClient(create_app(ExploreConfig(runs=[zoo])), base_url="http://127.0.0.1")


def test_every_run_folder_is_listed_on_its_own_broken_ones_with_their_reason(zoo_client):
    for sort in (None, "best_val_acc", "seconds", "model", "epochs"):
        response = zoo_client.get("/api/runs", params={"sort": sort} if sort else {})
        assert response.status_code == 200, (sort, response.text)
        assert SECRET not in response.text
        listing = {r["name"]: r for r in response.json()["runs"]}
        assert set(listing) == set(RUNS), sort  # link-folder leaves the root: not listed
        for name, (status, words) in RUNS.items():
            reason = listing[name]["broken"]
            assert (reason is None) == (status == 200), (name, reason)
            assert reason is None or words in reason, (name, reason)
        rows = {r["values"]["run"]: r for r in response.json()["table"]["rows"]}
        assert set(rows) == set(RUNS)
        assert rows["good-train"]["values"]["best_val_acc"] == 0.8 and rows["good-train"]["values"]["epochs"] == 2
        assert rows["good-study"]["values"]["best_val_acc"] == 0.9
        assert all(r["bar"] is None or 0 <= r["bar"] <= 1 for r in rows.values())


@pytest.mark.parametrize("name", sorted(RUNS))
def test_a_broken_run_answers_its_reason_never_500(zoo_client, name):
    status, words = RUNS[name]
    for params in ({}, {"sort": "val_acc"}):
        response = zoo_client.get(f"/api/runs/{name}", params=params)
        if status != 200:
            assert response.status_code == status and words in response.json()["error"], response.text
            break
        assert response.status_code in (200, 400), response.text  # 400: no such column to rank by
        assert SECRET not in response.text
        if response.status_code == 200:
            assert all(bar is None or 0 <= bar <= 1 for bar in (r["bar"] for r in response.json()["table"]["rows"]))


def test_links_leaving_the_root_are_neither_listed_nor_served(zoo_client):
    assert zoo_client.get("/api/runs/link-folder").status_code == 404
    study = zoo_client.get("/api/runs/good-study").json()
    assert study["figures"] == ["curves.png"] and study["report"] == "# study"
    assert zoo_client.get("/api/runs/good-study/figures/curves.png").content == PNG
    response = zoo_client.get("/api/runs/good-study/figures/leak.png")
    assert response.status_code == 404 and SECRET.encode() not in response.content
    train = zoo_client.get("/api/runs/good-train").json()
    assert train["report"] is None and train["facts"]["summary"]["best_val_acc"] == 0.8
    assert zoo_client.get("/api/runs/link-inside").json()["facts"] == train["facts"]


def test_links_out_of_the_session_runs_are_not_served(client, runs_root, tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG not yours")
    (runs_root / "study" / "leak.png").symlink_to(secret)
    (runs_root / "elsewhere").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "results.json").write_text("{}")
    try:
        listing = client.get("/api/runs").json()
        assert "elsewhere" not in {r["name"] for r in listing["runs"]}
        assert "leak.png" not in client.get("/api/runs/study").json()["figures"]
        assert client.get("/api/runs/study/figures/leak.png").status_code == 404
    finally:
        (runs_root / "study" / "leak.png").unlink()
        (runs_root / "elsewhere").unlink()


@pytest.mark.parametrize(
    "params, status",
    [
        ({"model": 1, "ref": "digits:0"}, 404),
        ({"model": -1, "ref": "digits:0"}, 404),
        ({"model": 0, "ref": "upload:../../etc/passwd"}, 404),
        ({"model": 0, "ref": "../etc:1"}, 404),
        ({"model": 0, "ref": "/etc/passwd"}, 400),
        ({"model": 0, "ref": "digits:99999"}, 404),
    ],
)
def test_models_and_images_are_reached_by_name_only(client, params, status):
    response = client.get("/api/attention", params=params)
    assert response.status_code == status and response.json()["error"]


# -- who may ask: Host, token, Origin --------------------------------------------------------------


SERVED: dict[str, tuple[ExploreConfig, object]] = {}


def served(host: str) -> tuple[TestClient, str | None]:
    """A client (sending no Origin) of an explorer configured for ``host``, made once per host, and its token."""
    if host not in SERVED:
        config = ExploreConfig(host=host, allowed_hosts=["explorer.lan"] if host == "::1" else [])
        SERVED[host] = config, create_app(config)
    config, app = SERVED[host]
    return TestClient(app, base_url="http://testserver", follow_redirects=False), config.token


@pytest.mark.parametrize(
    "bound, host, status",
    [
        ("127.0.0.1", "127.0.0.1", 200),
        ("127.0.0.1", "localhost", 200),
        ("127.0.0.1", "[::1]", 200),
        ("127.0.0.1", "localhost:80", 200),
        ("127.0.0.1", "LOCALHOST", 200),
        ("127.0.0.1", "localhost:8000", 400),  # not the port it listens on
        ("127.0.0.1", "attacker.example", 400),
        ("127.0.0.1", "localhost.attacker.example", 400),
        ("127.0.0.1", "127.0.0.2", 400),
        ("127.0.0.1", "127.0.0.1:x", 400),
        ("127.0.0.1", "::1", 400),
        ("127.0.0.2", "127.0.0.2", 200),
        ("127.0.0.2", "localhost", 200),
        ("127.0.0.2", "attacker.example", 400),  # the check once switched off here
        ("::1", "[::1]", 200),
        ("::1", "explorer.lan", 200),  # a name added with allowed_hosts
        ("::1", "attacker.example", 400),
        ("192.0.2.10", "192.0.2.10", 200),
        ("192.0.2.10", "localhost", 400),
        ("192.0.2.10", "attacker.example", 400),
        ("0.0.0.0", "192.0.2.10", 200),
        ("0.0.0.0", "[2001:db8::1]", 200),
        ("0.0.0.0", "localhost", 200),
        ("0.0.0.0", socket.gethostname(), 200),
        ("0.0.0.0", "attacker.example", 400),
    ],
)
def test_the_host_header_must_name_the_address_served(bound, host, status):
    client, token = served(bound)
    response = client.get("/api/info", headers={"host": host, **({"x-vitlab-token": token} if token else {})})
    assert response.status_code == status, response.text
    if status == 400:
        assert "Host header" in response.json()["error"]


def test_a_token_is_generated_off_loopback_only():
    assert served("127.0.0.1")[1] is None and served("::1")[1] is None
    tokens = {served(h)[1] for h in ("0.0.0.0", "192.0.2.10")}
    assert len(tokens) == 2 and all(len(t) >= 32 for t in tokens)
    assert ExploreConfig(host="localhost").token is None


@pytest.mark.parametrize(
    "method, path, headers, status",
    [
        ("GET", "/api/info", {}, 401),
        ("GET", "/", {}, 401),
        ("GET", "/static/style.css", {}, 401),
        ("GET", "/api/info", {"x-vitlab-token": "TOKEN"}, 200),
        ("GET", "/api/info", {"x-vitlab-token": "TOKEN-but-longer"}, 401),
        ("GET", "/api/info", {"x-vitlab-token": ""}, 401),
        ("GET", "/api/info", {"cookie": "vitlab_token_80=TOKEN"}, 200),
        ("GET", "/api/info", {"cookie": "vitlab_token_8000=TOKEN"}, 401),  # another explorer's cookie
        ("GET", "/api/info", {"cookie": "vitlab_token_80=wrong"}, 401),
        ("GET", "/api/info?token=wrong", {}, 401),
        ("GET", "/?token=TOKEN", {}, 303),
        ("POST", "/api/uploads?token=TOKEN", {"origin": "http://192.0.2.10"}, 401),  # the query opens pages only
        ("POST", "/api/uploads", {"x-vitlab-token": "TOKEN", "origin": "http://attacker.example"}, 403),
    ],
)
def test_off_loopback_every_request_needs_the_token(method, path, headers, status):
    client, token = served("0.0.0.0")
    headers = {"host": "192.0.2.10", **{k: v.replace("TOKEN", token) for k, v in headers.items()}}
    response = client.request(method, path.replace("TOKEN", token), headers=headers)
    assert response.status_code == status, response.text
    if status == 401:
        assert "token" in response.json()["error"] and token not in response.text


def test_the_token_in_the_address_becomes_a_cookie_that_opens_the_page():
    client, token = served("0.0.0.0")
    first = client.get(f"/?token={token}&tab=runs", headers={"host": "192.0.2.10"})
    assert first.status_code == 303 and first.headers["location"] == "/?tab=runs"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"vitlab_token_80={token}") and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get("/", headers={"host": "192.0.2.10"}).status_code == 200


@pytest.mark.parametrize(
    "headers, status",
    [
        ({"origin": "http://127.0.0.1"}, 200),
        ({"origin": "http://127.0.0.1:80"}, 200),
        ({"sec-fetch-site": "same-origin"}, 200),
        ({"sec-fetch-site": "none"}, 200),
        ({"origin": "http://127.0.0.1", "sec-fetch-site": "same-origin"}, 200),
        ({}, 403),
        ({"origin": "http://attacker.example"}, 403),
        ({"origin": "null"}, 403),
        ({"origin": "http://localhost"}, 403),  # the same machine, another origin
        ({"origin": "http://127.0.0.1:8000"}, 403),
        ({"origin": "https://127.0.0.1"}, 403),
        ({"sec-fetch-site": "cross-site"}, 403),
        ({"sec-fetch-site": "same-site"}, 403),
        ({"origin": "http://127.0.0.1", "sec-fetch-site": "cross-site"}, 403),
    ],
)
def test_state_changing_requests_need_the_explorers_own_origin(headers, status):
    client, _ = served("127.0.0.1")
    response = upload(client, encoded(Image.new("RGB", (8, 8)), "PNG"), headers={"host": "127.0.0.1", **headers})
    assert response.status_code == status, response.text
    if status == 403:
        assert "origin" in response.json()["error"]


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
def test_other_methods_need_the_origin_too(method):
    client, _ = served("127.0.0.1")
    assert client.request(method, "/api/runs", headers={"host": "127.0.0.1"}).status_code == 403
    assert client.get("/api/runs", headers={"host": "127.0.0.1"}).status_code == 200


def test_refusals_carry_the_security_headers():
    response = served("127.0.0.1")[0].get("/api/info", headers={"host": "attacker.example"})
    assert response.status_code == 400 and "default-src 'self'" in response.headers["content-security-policy"]


def test_front_end_is_self_contained(client):
    page = client.get("/")
    assert page.status_code == 200 and "default-src 'self'" in page.headers["content-security-policy"]
    static = files("vitlab.explore") / "static"
    texts = {p.name: p.read_text() for p in [static / "index.html", static / "style.css", *(static / "js").iterdir()]}
    assert len(texts) >= 9
    for name, text in texts.items():
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), f"{name} refers to another host"
    for src in re.findall(r'(?:src|href)="(/static/[^"]+)"', texts["index.html"]):
        assert client.get(src).status_code == 200
    for name, text in texts.items():
        for module in re.findall(r'from "\./([a-z]+\.js)"', text):
            assert client.get(f"/static/js/{module}").status_code == 200, (name, module)
