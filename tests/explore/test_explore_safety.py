"""What the explorer refuses: bad uploads, paths outside what it was given, foreign hosts, CDNs."""
import io
import re
from importlib.resources import files

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from vitlab.explore import ExploreConfig, create_app, decode_array
from vitlab.explore import images as explore_images


def encoded(image: Image.Image, fmt: str) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def upload(client, data: bytes, name: str = "picture.png", mime: str = "image/png"):
    return client.post("/api/uploads", files={"file": (name, data, mime)})


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


@pytest.mark.parametrize("data, words", [
    (encoded(Image.new("RGB", (8, 8)), "GIF"), "PNG or JPEG"),
    (encoded(Image.new("RGB", (8, 8)), "BMP"), "PNG or JPEG"),
    (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "PNG or JPEG"),
    (encoded(Image.new("RGB", (8, 8)), "PNG")[:40], "PNG or JPEG"),
    (b"", "empty"),
])
def test_other_files_are_refused_with_a_clear_message(client, data, words):
    response = upload(client, data)
    assert response.status_code == 415 and words in response.json()["error"]


def test_size_and_pixel_limits(runs_root, monkeypatch):
    small = TestClient(create_app(ExploreConfig(upload_limit=2000)), base_url="http://127.0.0.1")
    noise = np.random.default_rng(1).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    response = upload(small, encoded(Image.fromarray(noise), "PNG"))
    assert response.status_code == 413 and "2,000" in response.json()["error"]
    monkeypatch.setattr(explore_images, "MAX_PIXELS", 100)
    response = upload(small, encoded(Image.new("L", (11, 10)), "PNG"))
    assert response.status_code == 413 and "11x10" in response.json()["error"]


def test_upload_needs_the_file_field(client):
    response = client.post("/api/uploads", data={"other": "x"})
    assert response.status_code == 400 and "'file'" in response.json()["error"]


@pytest.mark.parametrize("path", [
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
])
def test_path_traversal_is_refused(client, path):
    response = client.get(path)
    assert response.status_code in (400, 404), (path, response.status_code)
    assert b"import" not in response.content and b"root:" not in response.content


def test_links_out_of_a_run_folder_are_not_served(client, runs_root, tmp_path):
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


@pytest.mark.parametrize("params, status", [
    ({"model": 1, "ref": "digits:0"}, 404),
    ({"model": -1, "ref": "digits:0"}, 404),
    ({"model": 0, "ref": "upload:../../etc/passwd"}, 404),
    ({"model": 0, "ref": "../etc:1"}, 404),
    ({"model": 0, "ref": "/etc/passwd"}, 400),
    ({"model": 0, "ref": "digits:99999"}, 404),
])
def test_models_and_images_are_reached_by_name_only(client, params, status):
    response = client.get("/api/attention", params=params)
    assert response.status_code == status and response.json()["error"]


def test_foreign_host_headers_are_refused(client):
    assert client.get("/api/info", headers={"host": "attacker.example"}).status_code == 400
    assert client.get("/api/info", headers={"host": "localhost:8000"}).status_code == 200


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
