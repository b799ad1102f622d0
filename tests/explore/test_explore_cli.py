"""`vitlab explore`: options to config, loopback by default, the address printed, errors named."""
import pytest
import uvicorn

from vitlab.cli.main import build_parser, main
from vitlab.cli.explore import explore_config


def parse(*argv):
    return build_parser().parse_args(["explore", *argv])


def test_serves_loopback_by_default_and_prints_the_address(runs_root, monkeypatch, capsys):
    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: served.update(app=app, **options))
    code = main(["explore", "--checkpoint", str(runs_root / "digits-vit"), "--runs", str(runs_root), "--port", "8123"])
    assert code == 0
    assert served["host"] == "127.0.0.1" and served["port"] == 8123
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8123/" in out and "digits-vit" in out
    paths = {route.path for route in served["app"].routes}
    assert {"/", "/api/tokens", "/api/attention", "/api/runs/{name}"} <= paths


def test_options_become_the_config(runs_root, tmp_path):
    config = explore_config(parse("--checkpoint", "a.safetensors", "b", "--runs", str(runs_root),
                                  "--data-dir", str(tmp_path), "--upload-limit", "1000", "--max-side", "64"))
    assert config.checkpoints == ["a.safetensors", "b"] and config.runs == [str(runs_root)]
    assert (config.data_dir, config.upload_limit, config.max_side) == (str(tmp_path), 1000, 64)
    assert "*" not in config.allowed_hosts and "127.0.0.1" in config.allowed_hosts
    assert explore_config(parse("--host", "0.0.0.0")).allowed_hosts == ["*"]


def test_runs_default_to_the_runs_folder_when_it_exists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert explore_config(parse()).runs == []
    (tmp_path / "runs").mkdir()
    assert [str(r) for r in explore_config(parse()).runs] == ["runs"]


@pytest.mark.parametrize("argv, words", [
    (["--runs", "no/such/folder"], "no/such/folder"),
    (["--data-dir", "no/such/data"], "no/such/data"),
    (["--checkpoint", "no/such/run"], "no checkpoint at no/such/run"),
    (["--upload-limit", "0"], "--upload-limit"),
])
def test_bad_options_are_named(argv, words, monkeypatch, capsys):
    monkeypatch.setattr(uvicorn, "run", lambda *a, **k: pytest.fail("must not serve"))
    assert main(["explore", *argv]) == 2
    assert words in capsys.readouterr().err
