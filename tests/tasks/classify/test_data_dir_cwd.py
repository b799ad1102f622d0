"""A run records its data folder absolute: trained from one working directory with a relative ``--data-dir``, it is
evaluated from another (which holds a different folder of that name) on the same images, with the same numbers. A
relative folder an earlier vitlab recorded is refused in one line naming it and saying to pass the full folder, for
evaluate / explain and for ``--resume``; the full folder given explicitly is taken (the fingerprint still checked)."""

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from tests.data.test_records import make_photos, write_folder

from vitlab.cli.main import main
from vitlab.data.paths import absolute_data_dir, is_relative_path, is_url, recorded_data_dir, resumed_data_dir
from vitlab.errors import DataError
from vitlab.runs import load_checkpoint, save_checkpoint

TINY = ["--image-size", "16", "--batch-size", "8", "--epochs", "1", "--set", "depth=1", "--set", "embed_dim=16"]
TINY += ["--set", "num_heads=2", "--set", "patch_size=8", "--set", "warmup_epochs=0", "--quiet", "--device", "cpu"]
SCHEMES = ("https", "http", "s3", "gs", "hf", "s3a", "az")


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def metrics(argv: list[str], out: Path, capsys) -> dict:
    capsys.readouterr()
    assert main([*argv, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "differ from what" not in err, err  # the recorded split fingerprints match: the same files were read
    return json.loads((out / "metrics.json").read_text())


@pytest.fixture
def trained(tmp_path, monkeypatch, capsys):
    """A run trained from ``tmp/work`` on the relative ``--data-dir photos``; a decoy ``tmp/elsewhere/photos``."""
    rng = np.random.default_rng(7)
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    photos = write_folder(work / "photos", make_photos(rng, per_class=6))
    write_folder(elsewhere / "photos", make_photos(rng, per_class=9))  # same classes, other images
    monkeypatch.chdir(work)
    run = tmp_path / "run"
    assert main(["train", "--dataset", "folder", "--data-dir", "photos", *TINY, "--out", str(run)]) == 0
    capsys.readouterr()
    return run, photos, elsewhere


@pytest.mark.slow
def test_a_relative_data_dir_is_recorded_absolute_and_read_the_same_from_another_cwd(
    trained, tmp_path, monkeypatch, capsys
):
    run, photos, elsewhere = trained
    assert json.loads((run / "config.json").read_text())["data_dir"] == str(photos)
    assert load_checkpoint(run).data.data_dir == str(photos)
    here = metrics(["evaluate", str(run), "--split", "test", "--device", "cpu"], tmp_path / "m1", capsys)
    monkeypatch.chdir(elsewhere)  # its own ./photos must not be read
    there = metrics(["evaluate", str(run), "--split", "test", "--device", "cpu"], tmp_path / "m2", capsys)
    assert there == here and here["n"] == len(load_checkpoint(run).splits().test)
    # resuming from another cwd reads the recorded folder too (the run finished: nothing more to train)
    assert main(["train", "--resume", "--out", str(run), "--quiet", "--device", "cpu"]) == 0


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "explain"])
def test_a_relative_data_dir_an_earlier_vitlab_recorded_is_refused_in_one_line(
    command, trained, tmp_path, monkeypatch, capsys
):
    run, photos, elsewhere = trained
    loaded = load_checkpoint(run)
    want = metrics(["evaluate", str(run), "--split", "test", "--device", "cpu"], tmp_path / "want", capsys)
    old = save_checkpoint(
        loaded.model,
        tmp_path / "old.safetensors",
        loaded.kind,
        replace(loaded.data, data_dir="photos"),
        name=loaded.name,
    )
    monkeypatch.chdir(elsewhere)  # which holds a ./photos: the old run's path must not be re-resolved to it
    args = [command, str(old), "--device", "cpu"] + (["--split", "test"] if command == "evaluate" else [])
    assert main([*args, "--out", str(tmp_path / "refused")]) == 2
    line = one_error(capsys)
    assert f"{old} records its data folder as the relative path 'photos'" in line, line
    assert "pass --data-dir with the full folder" in line, line
    if command == "evaluate":  # the full folder, given: the same images, the same numbers
        got = metrics([*args, "--data-dir", str(photos)], tmp_path / "full", capsys)
        assert {k: v for k, v in got.items() if k != "checkpoint"} == {
            k: v for k, v in want.items() if k != "checkpoint"
        }


@pytest.mark.slow
def test_resume_of_a_run_recording_a_relative_data_dir_needs_the_full_folder(trained, tmp_path, monkeypatch, capsys):
    run, photos, elsewhere = trained
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "data_dir": "photos"}))  # as an earlier vitlab wrote it
    monkeypatch.chdir(elsewhere)
    resume = ["train", "--resume", "--out", str(run), "--quiet", "--device", "cpu"]
    assert main(resume) == 2
    line = one_error(capsys)
    assert "records its data folder as the relative path 'photos'" in line and "--data-dir" in line, line
    assert main([*resume, "--data-dir", str(elsewhere / "photos")]) == 2  # ends with photos, but other images
    assert "on other data than it trained with" in one_error(capsys)
    assert main([*resume, "--data-dir", str(tmp_path)]) == 2  # does not end with the recorded path
    assert "does not end with it" in one_error(capsys)
    assert main([*resume, "--data-dir", str(photos)]) == 0
    assert json.loads((run / "config.json").read_text())["data_dir"] == str(photos)  # recorded absolute now


def test_data_dir_resolution_over_many_paths(tmp_path, monkeypatch):
    """Generated relative paths resolve against the cwd when recorded; URLs stay; a recorded relative one is
    refused unless given; a resume takes a full folder exactly when it ends with the recorded path."""
    rng = np.random.default_rng(11)
    monkeypatch.chdir(tmp_path)
    words = ["data", "photos", "a b", "x.y", "ünï", "shards-{000..009}.tar", "train-*.tar"]
    for case in range(200):
        parts = [str(rng.choice(words)) for _ in range(int(rng.integers(1, 4)))]
        rel = os.path.join(*parts)
        if case % 3 == 1:
            rel = os.path.join(".", rel)
        full = absolute_data_dir(rel)
        assert full == os.path.join(str(tmp_path), *parts) and is_relative_path(rel) and not is_relative_path(full)
        assert absolute_data_dir(full) == full  # idempotent: a recorded folder stays what it is
        url = f"{rng.choice(SCHEMES)}://bucket/{'/'.join(parts)}?key=v"
        assert is_url(url) and absolute_data_dir(url) == url and not is_relative_path(url)
        assert recorded_data_dir("R", url, None) == url and recorded_data_dir("R", full, None) == full
        with pytest.raises(DataError, match=re.escape(f"records its data folder as the relative path {rel!r}")):
            recorded_data_dir("R", rel, None)
        assert recorded_data_dir("R", rel, "/given") == "/given"
        with pytest.raises(DataError, match="pass --data-dir with the full folder"):
            resumed_data_dir("R", rel, None)
        moved = str(tmp_path / "moved" / "deep" / os.path.normpath(rel))
        assert resumed_data_dir("R", rel, moved) == moved
        with pytest.raises(DataError, match="does not end with it"):
            resumed_data_dir("R", rel, str(tmp_path / "moved" / "other"))
    assert absolute_data_dir(None) is None and recorded_data_dir("R", None, None) is None
    assert absolute_data_dir("~/d") == os.path.join(os.path.expanduser("~"), "d")
