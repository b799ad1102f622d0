"""`vitlab explore`: options to config, loopback by default, the address printed (with a token off
loopback), errors named in one line."""

import pytest
import torch
import uvicorn
from fastapi.testclient import TestClient
from safetensors.torch import save

from vitlab.cli.explore import explore_config
from vitlab.cli.main import build_parser, main


def parse(*argv):
    return build_parser().parse_args(["explore", *argv])


@pytest.mark.slow
def test_serves_loopback_by_default_and_prints_the_address(runs_root, monkeypatch, capsys):
    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app, **options))
    code = main(["explore", "--checkpoint", str(runs_root / "digits-vit"), "--runs", str(runs_root), "--port", "8123"])
    assert code == 0
    assert served["host"] == "127.0.0.1" and served["port"] == 8123
    out, err = capsys.readouterr()
    assert "http://127.0.0.1:8123/  " in out and "digits-vit" in out and "token" not in out + err
    paths = route_paths(served["app"].routes)
    assert {"/", "/api/tokens", "/api/attention", "/api/forward", "/api/train", "/api/runs/{name}"} <= paths


def route_paths(routes) -> set[str]:
    """Every path the app serves, the routers it includes looked into (FastAPI keeps them as entries)."""
    found: set[str] = set()
    for route in routes:
        inner = getattr(route, "original_router", None)
        found |= route_paths(inner.routes) if inner is not None else {getattr(route, "path", "")}
    return found


def test_options_become_the_config(runs_root, tmp_path):
    config = explore_config(
        parse(
            "--checkpoint",
            "a.safetensors",
            "b",
            "--runs",
            str(runs_root),
            "--data-dir",
            str(tmp_path),
            "--upload-limit",
            "1000",
            "--max-side",
            "64",
        )
    )
    assert config.checkpoints == ["a.safetensors", "b"] and config.runs == [str(runs_root)]
    assert (config.data_dir, config.upload_limit, config.max_side) == (str(tmp_path), 1000, 64)
    assert (config.host, config.token) == ("127.0.0.1", None)
    wide = explore_config(parse("--host", "0.0.0.0", "--allow-host", "box.lan", "--max-pixels", "500"))
    assert (wide.host, wide.allowed_hosts, wide.max_pixels) == ("0.0.0.0", ["box.lan"], 500) and len(wide.token) >= 32


@pytest.mark.parametrize("bound", ["0.0.0.0", "192.0.2.10", "::"])
def test_off_loopback_the_token_is_printed_once_with_a_warning(bound, tmp_path, monkeypatch, capsys):
    served = {}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app, **options))
    assert main(["explore", "--host", bound, "--port", "8124"]) == 0
    out, err = capsys.readouterr()
    (line,) = [line for line in out.splitlines() if "?token=" in line]
    token = line.split("?token=")[1].split()[0]
    host = f"[{bound}]" if ":" in bound else bound
    assert f"http://{host}:8124/?token={token}" in line and (out + err).count(token) == 1
    assert "WARNING" in err and bound in err
    client = TestClient(served["app"], base_url="http://192.0.2.10:8124", follow_redirects=False)
    assert client.get("/api/info").status_code == 401
    assert client.get("/api/info", headers={"x-vitlab-token": token}).status_code == 200


def test_the_host_check_follows_the_host_given(tmp_path, monkeypatch):
    served = {}
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app, **options))
    assert main(["explore", "--host", "127.0.0.2", "--port", "8125"]) == 0
    client = TestClient(served["app"], base_url="http://127.0.0.2:8125")
    assert client.get("/api/info").status_code == 200
    assert client.get("/api/info", headers={"host": "attacker.example:8125"}).status_code == 400


def test_runs_default_to_the_runs_folder_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert explore_config(parse()).runs == []
    (tmp_path / "runs").mkdir()
    assert [str(r) for r in explore_config(parse()).runs] == ["runs"]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--runs", "no/such/folder"], "no/such/folder"),
        (["--data-dir", "no/such/data"], "no/such/data"),
        (["--checkpoint", "no/such/run"], "no checkpoint at no/such/run"),
        (["--upload-limit", "0"], "--upload-limit"),
        (["--max-side", "0"], "--max-side"),
        (["--max-pixels", "-5"], "--max-pixels"),
        (["--port", "-1"], "--port"),
        (["--port", "0"], "--port"),
        (["--port", "70000"], "--port"),
        (["--host", "bad host"], "'bad host'"),
        (["--host", "127.0.0.1", "--allow-host", "a/b"], "'a/b'"),
    ],
)
def test_bad_options_are_named(argv, words, monkeypatch, capsys):
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("must not serve"))
    assert main(["explore", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err


def foreign_weights() -> bytes:
    return save({"x": torch.zeros(3)}, metadata={"format": "pt"})


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\0" * 7,
        b"not a checkpoint at all",
        bytes(range(256)) * 64,
        b"\x08\0\0\0\0\0\0\0{}      ",
        foreign_weights(),
    ],
)
def test_an_unreadable_checkpoint_is_one_line_not_a_traceback(content, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("must not serve"))
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    assert main(["explore", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and len(err.strip().splitlines()) == 1, err


class Planted:
    """A pickled object that would create ``path`` if it were ever unpickled."""

    def __init__(self, path) -> None:
        self.path = path

    def __reduce__(self):
        return open, (str(self.path), "w")


def test_a_pickle_given_as_checkpoint_is_never_unpickled(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("must not serve"))
    planted = tmp_path / "planted"
    torch.save({"state_dict": Planted(planted)}, tmp_path / "model.pth")
    assert main(["explore", "--checkpoint", str(tmp_path / "model.pth")]) == 2
    assert not planted.exists() and "model.pth" in capsys.readouterr().err
