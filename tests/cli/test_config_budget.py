"""The config-file budget: a size cap and no YAML aliases, refused in one line before any work, in
``--config`` of every command that takes one (and the run's own config.json on ``--resume``)."""

import os
import re

import pytest

from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.settings import CONFIG_FILE_LIMIT, read_config_file

LEVELS = "abcdefghi"


def billion_laughs(key: str = "a") -> str:
    """Ten lines whose aliases expand to 9**9 (387 million) strings, under config field ``key``."""
    lines = [f'{LEVELS[0]}: &{LEVELS[0]} ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip(LEVELS, LEVELS[1:]):
        lines.append(f"{name}: &{name} [{','.join(['*' + prev] * 9)}]")
    lines.append(f"{key}: *{LEVELS[-1]}")
    return "\n".join(lines) + "\n"


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and re.match(r"vitlab [\w ]+: error: ", lines[0]), err
    return lines[0]


COMMANDS = {
    "train": ["train", "--epochs", "1"],
    "train-segment": ["train", "--task", "segment", "--epochs", "1"],
    "pretrain-mae": ["pretrain", "mae", "--epochs", "1"],
    "pretrain-dino": ["pretrain", "dino", "--epochs", "1"],
    "compare": ["compare", "--epochs", "1"],
}


@pytest.mark.parametrize("field", ["model_overrides", "epochs", "lr", "augment", "mae", "unknown"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_billion_laughs_config_fails_at_once_in_one_line(tmp_path, capsys, command, field):
    path = tmp_path / "laughs.yaml"
    path.write_text(billion_laughs(field))
    assert main([*COMMANDS[command], "--config", str(path), "--out", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "laughs.yaml" in line and "aliases" in line and "line 2" in line  # refused at the first alias, unexpanded
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_config_over_the_size_cap_is_refused_unread(tmp_path, capsys, command, monkeypatch):
    path = tmp_path / "big.json"
    path.write_text('{"epochs": 1, "pad": "' + "x" * CONFIG_FILE_LIMIT + '"}')
    read = []
    real_read = type(path).read_text
    monkeypatch.setattr(type(path), "read_text", lambda self, *a, **k: read.append(self) or real_read(self, *a, **k))
    assert main([*COMMANDS[command], "--config", str(path), "--out", str(tmp_path / "out")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "big.json" in line and "1 MiB" in line and f"{path.stat().st_size:,} bytes" in line
    assert path not in read


def test_resume_reads_the_runs_config_json_under_the_same_budget(tmp_path, capsys):
    (tmp_path / ".vitlab-run").write_text('{"run_id": "0123456789abcdef", "kind": "classify"}')
    (tmp_path / "config.json").write_text('{"epochs": 1, "pad": "' + "x" * CONFIG_FILE_LIMIT + '"}')
    assert main(["train", "--resume", "--out", str(tmp_path)]) == 2
    assert "1 MiB" in one_error_line(capsys.readouterr().err)


def test_the_budget_in_the_reader(tmp_path):
    ok = tmp_path / "ok.yaml"
    ok.write_text("epochs: 3\nmodel_overrides: {depth: 2}\nanchored: &x 1\n")  # an anchor alone costs nothing
    assert read_config_file(ok) == {"epochs": 3, "model_overrides": {"depth": 2}, "anchored": 1}
    merge = tmp_path / "merge.yml"
    merge.write_text("base: &b {depth: 2}\nmodel_overrides:\n  <<: *b\n")
    with pytest.raises(ConfigError, match=r"merge.yml: line 3: YAML aliases \(\*b\) are not allowed"):
        read_config_file(merge)
    edge = tmp_path / "edge.json"
    edge.write_text('{"a": "' + "x" * (CONFIG_FILE_LIMIT - 9) + '"}')
    assert edge.stat().st_size == CONFIG_FILE_LIMIT
    assert len(read_config_file(edge)["a"]) == CONFIG_FILE_LIMIT - 9  # the cap itself is allowed
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ConfigError, match="deep.json is not valid JSON"):
        read_config_file(deep)
    deep_yaml = tmp_path / "deep.yaml"
    deep_yaml.write_text("a: " + "[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="deep.yaml is not valid YAML"):
        read_config_file(deep_yaml)
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ConfigError, match="bin.json is not valid JSON"):
        read_config_file(binary)
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="no config file"):
        read_config_file(fifo)
