"""The training route reads its JSON body within a budget: a body nested deeper than a training request can be, or
larger than one, is refused in one line (4xx) before it is parsed, never a 500 or a RecursionError."""

import json
import random

import pytest
from fastapi.testclient import TestClient

from vitlab.explore import ExploreConfig, create_app
from vitlab.explore.pages.train import MAX_BODY, MAX_NESTING, nesting


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    app = create_app(ExploreConfig(runs=[root]))
    return TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})


def nested(depth: int, rng: random.Random) -> str:
    """A JSON text of lists and objects ``depth`` deep, mixed at random, with brackets inside strings too."""
    opening, closing = [], []
    for _ in range(depth):
        if rng.random() < 0.5:
            opening.append("[")
            closing.append("]")
        else:
            opening.append('{"a[{": ')
            closing.append("}")
    return "".join(opening) + '"x]}\\"["' + "".join(reversed(closing))


@pytest.mark.parametrize("seed", range(12))
def test_the_nesting_is_counted_without_parsing(seed):
    rng = random.Random(seed)
    depth = rng.randint(1, 60)
    text = nested(depth, rng)
    assert nesting(text) == depth
    assert json.loads(text) is not None  # the generated text is JSON


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 50, 1000, 100_000])
@pytest.mark.parametrize("seed", range(3))
def test_a_deep_body_is_refused_in_one_line(client, depth, seed):
    body = nested(depth, random.Random(seed)).encode()
    if len(body) > MAX_BODY:  # past the body budget: refused for its size first
        body = b"[" * depth + b"]" * depth
    response = client.post("/api/train", content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500
    error = response.json()["error"]
    assert "\n" not in error and ("deep" in error or "bytes" in error)


@pytest.mark.parametrize(
    "body",
    [b"", b"{", b"\xff\xfe", b'{"name": "x", "epochs": }', b"nan", b"[" * 3 + b"]" * 2, b" " * (MAX_BODY + 1)],
)
def test_a_malformed_body_is_refused_in_one_line(client, body):
    response = client.post("/api/train", content=body, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500 and "\n" not in response.json()["error"]
