"""Atomic writes with the user's umask, strict JSON, cleanup of killed writes."""

import json
import os

import pytest

from vitlab.errors import DataError
from vitlab.runs import atomic_write, read_json, write_json
from vitlab.runs.files import clean_temp_files


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "file.bin"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two"
    assert os.listdir(target.parent) == ["file.bin"]


def test_atomic_write_failure_keeps_old_file(tmp_path, monkeypatch):
    target = tmp_path / "file.bin"
    atomic_write(target, b"old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        atomic_write(target, b"new")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["file.bin"]


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_gives_the_permissions_of_a_plain_open(tmp_path, mask, mode):
    old = os.umask(mask)
    try:
        atomic_write(tmp_path / "a.bin", b"x")
        write_json(tmp_path / "b.json", {"a": 1})
        with open(tmp_path / "plain", "w"):
            pass
    finally:
        os.umask(old)
    assert (tmp_path / "plain").stat().st_mode & 0o777 == mode  # the oracle: what open() gives
    for name in ("a.bin", "b.json"):
        assert (tmp_path / name).stat().st_mode & 0o777 == mode, name


def test_json_never_holds_nan(tmp_path):
    write_json(tmp_path / "x.json", {"x": float("nan"), "y": [float("inf"), -float("inf"), 1.5], "z": {"w": 2}})
    text = (tmp_path / "x.json").read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}")) == {
        "x": None,
        "y": [None, None, 1.5],
        "z": {"w": 2},
    }
    assert read_json(tmp_path / "x.json") == {"x": None, "y": [None, None, 1.5], "z": {"w": 2}}


def test_read_json_names_a_broken_file(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(DataError, match="bad.json"):
        read_json(tmp_path / "bad.json")


def test_writing_under_a_file_is_refused(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(DataError, match="is a file"):
        atomic_write(tmp_path / "afile" / "x.bin", b"x")


def test_temp_files_of_killed_writes_are_removed(tmp_path):
    (tmp_path / "sub").mkdir()
    tmp = tmp_path / "sub" / ".model.safetensors.abc123.tmp"
    tmp.write_bytes(b"half")
    (tmp_path / "keep.txt").write_text("k")
    assert clean_temp_files(tmp_path) == [tmp]
    assert not tmp.exists() and (tmp_path / "keep.txt").exists()
