"""Atomic writes with the user's umask, strict JSON, cleanup of killed writes."""

import json
import os

import pytest

from vitlab.errors import DataError
from vitlab.runs import atomic_write, read_json, write_json
from vitlab.runs.files import clean_temp_files, own_folder


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


def test_only_the_runs_own_temp_files_are_removed(tmp_path):
    run_id = "0123456789abcdef"
    (tmp_path / "last").mkdir()
    (tmp_path / "sub").mkdir()
    ours = [
        tmp_path / f".vitlab-{run_id}-config.json.ab12cd34.tmp",
        tmp_path / "last" / f".vitlab-{run_id}-state.pt.x.tmp",
    ]
    theirs = [
        tmp_path / "x.tmp",  # the user's
        tmp_path / ".model.safetensors.abc123.tmp",  # no vitlab prefix
        tmp_path / ".vitlab-fedcba9876543210-config.json.ab12cd34.tmp",  # another run's
        tmp_path / "sub" / f".vitlab-{run_id}-a.tmp",  # not a layout folder
        tmp_path / "keep.txt",
    ]
    for path in ours + theirs:
        path.write_bytes(b"half")
    assert sorted(clean_temp_files(tmp_path, run_id)) == sorted(ours)
    assert all(p.read_bytes() == b"half" for p in theirs) and not any(p.exists() for p in ours)


def test_temp_files_carry_the_vitlab_prefix_and_the_open_runs_id(tmp_path, monkeypatch):
    names = []
    real = os.replace

    def spy(src, dst):
        names.append(os.path.basename(src))
        real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    atomic_write(tmp_path / "plain.bin", b"x")
    own_folder(tmp_path / "run", "0123456789abcdef")
    try:
        atomic_write(tmp_path / "run" / "best" / "model.safetensors", b"x")
        atomic_write(tmp_path / "run" / "c.json", b"x", tag="fedcba9876543210")
    finally:
        own_folder(tmp_path / "run", None)
    assert names[0].startswith(".vitlab-plain.bin.") and names[0].endswith(".tmp")
    assert names[1].startswith(".vitlab-0123456789abcdef-model.safetensors.")
    assert names[2].startswith(".vitlab-fedcba9876543210-c.json.")
