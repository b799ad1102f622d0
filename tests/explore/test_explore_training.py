"""Training you can watch: a run started from the explorer is an ordinary run folder `vitlab evaluate`
accepts, its progress streams as server-sent events, it can be cancelled, one runs at a time, and the
explorer's guards apply to starting it."""

import json
import time

import pytest
from fastapi.testclient import TestClient

from vitlab.cli.main import main
from vitlab.explore import ExploreConfig, create_app, decode_array
from vitlab.runs import load_checkpoint

pytestmark = pytest.mark.slow  # trains


@pytest.fixture
def watched(runs_root, tmp_path):
    """An explorer whose runs root is an empty folder, and the folder."""
    root = tmp_path / "runs"
    root.mkdir()
    app = create_app(ExploreConfig(checkpoints=[runs_root / "digits-vit"], runs=[root]))
    client = TestClient(app, base_url="http://127.0.0.1", headers={"origin": "http://127.0.0.1"})
    return client, root


def wait_until_finished(client, seconds=240):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job = client.get("/api/train").json()["job"]
        if job and job["status"] != "running":
            return job
        time.sleep(0.2)
    pytest.fail("the training did not end in time")


def events(client):
    """Every event of the current job's stream, in order: (id, event, data)."""
    out = []
    with client.stream("GET", "/api/train/events") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        block = {}
        for line in response.iter_lines():
            if not line:
                if "event" in block:
                    out.append((block["id"], block["event"], json.loads(block["data"])))
                block = {}
                continue
            key, _, value = line.partition(": ")
            block[key] = value
    return out


def test_a_watched_run_is_a_run_folder_vitlab_evaluate_accepts(watched, capsys):
    client, root = watched
    started = client.post("/api/train", json={"name": "watched", "epochs": 2, "rows": 200})
    assert started.status_code == 200, started.text
    again = client.post("/api/train", json={"name": "other", "epochs": 2})
    assert again.status_code == 409 and "is training" in again.json()["error"]
    job = wait_until_finished(client)
    assert job["status"] == "done" and job["message"].startswith("done: 2 epochs")
    assert [r["epoch"] for r in job["records"]] == [1, 2] and job["snapshots"] == [0, 1, 2]
    stream = events(client)
    kinds = [kind for _, kind, _ in stream]
    assert kinds[0] == "epoch" and kinds[-1] == "end" and kinds.count("epoch") == 3 and "step" in kinds
    assert [i for i, _, _ in stream] == [f"1.{k}" for k in range(len(stream))]
    losses = [data["loss"] for _, kind, data in stream if kind == "step"]
    assert losses and all(loss > 0 for loss in losses)
    folder = root / "watched"
    loaded = load_checkpoint(folder)
    assert loaded.name == "vit-digits" and loaded.data.dataset == "digits"
    capsys.readouterr()
    assert main(["evaluate", str(folder)]) == 0
    assert "acc" in capsys.readouterr().out
    first, last = (
        client.get("/api/train/snapshot", params={"epoch": 0}).json(),
        client.get("/api/train/snapshot", params={"epoch": 2}).json(),
    )
    assert decode_array(first["heat"]).shape == (4, 4, 4, 4) and decode_array(first["similarity"]).shape == (16, 16)
    assert (decode_array(first["similarity"]) != decode_array(last["similarity"])).any()  # positions moved
    info = client.get("/api/info").json()
    assert job["model_index"] == 1 and info["models"][1]["file"] == str(folder)
    names = [r["name"] for r in client.get("/api/runs").json()["runs"]]
    assert names == ["watched"]
    taken = client.post("/api/train", json={"name": "watched", "epochs": 1})
    assert taken.status_code == 409 and "exists" in taken.json()["error"]


def test_a_cancelled_run_keeps_the_epochs_it_finished(watched):
    client, root = watched
    assert client.post("/api/train", json={"name": "long", "epochs": 60, "rows": 200}).status_code == 200
    deadline = time.monotonic() + 120
    while not client.get("/api/train").json()["job"]["records"]:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert client.post("/api/train/cancel").status_code == 200
    job = wait_until_finished(client)
    assert job["status"] == "cancelled" and "--resume" in job["message"]
    assert 1 <= len(job["records"]) < 60
    lines = (root / "long" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == len(job["records"])
    assert client.post("/api/train/cancel").status_code == 409


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ({"name": "../escape", "epochs": 1}, "name '../escape'"),
        ({"name": ".hidden", "epochs": 1}, "name '.hidden'"),
        ({"name": "ok", "epochs": 0}, "epochs must be a whole number in [1, 60]"),
        ({"name": "ok", "epochs": 1, "rows": 10}, "rows must be a whole number"),
        ({"name": "ok", "model": "vit-base-patch16-224"}, "the explorer trains"),
        ({"name": "ok", "path": "/tmp"}, "unknown fields ['path']"),
        ([1, 2], "as JSON"),
    ],
)
def test_bad_trainings_are_refused_in_one_line(watched, body, words):
    client, root = watched
    response = client.post("/api/train", json=body)
    assert response.status_code == 400 and words in response.json()["error"]
    assert list(root.iterdir()) == []


def test_starting_a_training_needs_the_explorers_origin(watched):
    client, root = watched
    foreign = client.post("/api/train", json={"name": "x", "epochs": 1}, headers={"origin": "http://evil.example"})
    assert foreign.status_code == 403
    cancel = client.post("/api/train/cancel", headers={"origin": "http://evil.example"})
    assert cancel.status_code == 403 and list(root.iterdir()) == []


def test_without_a_runs_folder_a_training_goes_to_runs_here(runs_root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    client = TestClient(
        create_app(ExploreConfig(checkpoints=[runs_root / "digits-vit"])),
        base_url="http://127.0.0.1",
        headers={"origin": "http://127.0.0.1"},
    )
    assert client.get("/api/train").json()["root"] == str(tmp_path / "runs")
    assert client.get("/api/train/events").status_code == 404
    assert not (tmp_path / "runs").exists()  # made by the first training, not by looking
