"""Nothing of the user's is touched: run folders are vitlab's by a marker, never by file names.

Every writer (train, train --task segment, pretrain, evaluate --out, explain --out, compare --out)
is pointed at a folder of the user's files, with and without --overwrite: each file survives
byte-identical whether the command refuses or runs. ``--out ''`` never makes the working directory
a run folder.
"""

import json
import os
import re
from pathlib import Path

import pytest

from vitlab.cli.main import main
from vitlab.errors import RunFolderError
from vitlab.models import build_registered
from vitlab.runs import DataConfig, RunDir, save_checkpoint
from vitlab.runs.layout import MARKER

TINY_MODEL = ["--set", "depth=1", "--set", "embed_dim=16", "--set", "num_heads=2"]
COMMON = ["--threads", "1", "--device", "cpu", "--quiet"]

# The user's files: code, notes, data, their own temp file, their own config.json and best/ folder.
FOREIGN = {
    "src/main.py": b"print('years of work')\n",
    "README.txt": b"my project\n",
    "data/train.csv": b"x,y\n1,2\n",
    "x.tmp": b"my temp file\n",
    ".notes.abcdefgh.tmp": b"looks like an old vitlab temp file, but is not\n",
    "config.json": b'{"mine": true}\n',
    "best/notes.txt": b"my best ideas\n",
}


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder``: files with their bytes, folders as None."""
    found: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(folder):
        rel = Path(root).relative_to(folder)
        for d in dirs:
            found[str(rel / d)] = None
        for f in files:
            found[str(rel / f)] = (Path(root) / f).read_bytes()
    return found


def plant(folder: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)


def one_error_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and re.match(r"vitlab [\w ]+: error: ", lines[0]), err
    return lines[0]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny untrained digits classifier (evaluate and explain need one, not a good one)."""
    data = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)], dataset="digits", seed=0)
    model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2)
    return save_checkpoint(model, tmp_path_factory.mktemp("ckpt") / "m.safetensors", "classifier", data)


def writers(checkpoint: Path) -> dict[str, tuple[str, list[str]]]:
    """Each writer: (the run kind it writes, its command line without --out)."""
    return {
        "train": ("classify", ["train", "--epochs", "1", "--rows", "40", *TINY_MODEL, *COMMON]),
        "train-segment": (
            "segment",
            ["train", "--task", "segment", "--epochs", "1", "--set", "count=24", "--batch-size", "8", *COMMON],
        ),
        "pretrain": ("mae", ["pretrain", "mae", "--epochs", "1", "--rows", "40", *TINY_MODEL, *COMMON]),
        "evaluate": ("evaluate", ["evaluate", str(checkpoint), "--device", "cpu"]),
        "explain": ("explain", ["explain", str(checkpoint), "--method", "attention", "--device", "cpu"]),
        "compare": (
            "compare",
            ["compare", "--epochs", "1", "--rows", "40", "--patches", "4", "--jobs", "1", "--threads", "1"],
        ),
    }


WRITERS = ["train", "train-segment", "pretrain", "evaluate", "explain", "compare"]


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("writer", WRITERS)
def test_a_folder_of_the_users_files_is_refused_untouched(tmp_path, capsys, checkpoint, writer, overwrite):
    folder = tmp_path / "mine"
    plant(folder, FOREIGN)
    before = snapshot(folder)
    _, command = writers(checkpoint)[writer]
    code = main([*command, "--out", str(folder), *(["--overwrite"] if overwrite else [])])
    assert code == 2
    line = one_error_line(capsys.readouterr().err)
    assert "is not a vitlab run" in line and "nothing in it was touched" in line
    assert snapshot(folder) == before  # byte-identical, and nothing added (no lock, no marker)


@pytest.mark.parametrize("writer", WRITERS)
def test_a_user_config_json_or_best_folder_alone_is_not_a_vitlab_run(tmp_path, capsys, checkpoint, writer):
    _, command = writers(checkpoint)[writer]
    for files in ({"config.json": b'{"epochs": 1}'}, {"best/notes.txt": b"mine"}, {"best/model.safetensors": b"x"}):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        plant(folder, {**files, "notes.txt": b"keep"})
        before = snapshot(folder)
        assert main([*command, "--out", str(folder), "--overwrite"]) == 2
        assert "is not a vitlab run" in one_error_line(capsys.readouterr().err)
        assert snapshot(folder) == before


@pytest.mark.slow
@pytest.mark.parametrize("writer", WRITERS)
def test_overwriting_a_vitlab_run_keeps_the_users_files_in_it(tmp_path, capsys, checkpoint, writer):
    """A marked run of the same kind, with the user's files added to it: --overwrite replaces the
    run's own files and leaves every one of the user's byte-identical (config.json excepted: in a
    marked folder it is the run's)."""
    kind, command = writers(checkpoint)[writer]
    folder = tmp_path / "run"
    old = RunDir(folder).open(kind, {"old": True})
    old.close()
    (folder / f".vitlab-{old.run_id}-summary.json.abcd1234.tmp").write_bytes(b"half written")
    users = {k: v for k, v in FOREIGN.items() if k != "config.json"}
    plant(folder, users)
    assert main([*command, "--out", str(folder), "--overwrite"]) == 0, capsys.readouterr().err
    after = snapshot(folder)
    assert {k: after.get(k) for k in users} == users
    marker = json.loads((folder / MARKER).read_text())
    assert marker["kind"] == kind and marker["run_id"] != old.run_id
    assert not (folder / f".vitlab-{old.run_id}-summary.json.abcd1234.tmp").exists()
    assert json.loads((folder / "run.json").read_text())["kind"] == kind


def empty_outs():
    for writer in WRITERS:
        for out in ("", " ", "\t\n"):
            yield pytest.param(writer, out, id=f"{writer}-{out!r}")


@pytest.mark.parametrize("writer, out", list(empty_outs()))
def test_an_empty_out_is_refused_and_the_working_directory_untouched(
    tmp_path, capsys, monkeypatch, checkpoint, writer, out
):
    monkeypatch.chdir(tmp_path)
    plant(tmp_path, {"README.txt": b"cwd"})
    _, command = writers(checkpoint)[writer]
    assert main([*command, "--out", out]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "empty name" in line and "working directory" in line
    assert snapshot(tmp_path) == {"README.txt": b"cwd"}


def test_empty_names_are_refused_in_the_library_too():
    for out in ("", "  "):
        with pytest.raises(RunFolderError, match="empty name"):
            RunDir(out)


def test_an_older_vitlab_folder_is_vitlabs_only_when_every_file_is_in_the_layout(tmp_path):
    older = {
        "run.json": b'{"kind": "classify"}',
        "config.json": b"{}",
        "metrics.jsonl": b"",
        "last/state.pt": b"x",
        "last/model.safetensors": b"x",
        "best/model.safetensors": b"x",
        "last/.state.pt.ab12cd34.tmp": b"an old vitlab's temp file",
        "loss.png": b"png",
    }
    plant(tmp_path / "old", older)
    assert RunDir(tmp_path / "old").existing_kind() == "classify"
    RunDir(tmp_path / "old").open("classify", {}, overwrite=True).close()
    assert set(snapshot(tmp_path / "old")) == {".lock", MARKER, "run.json", "config.json"}

    plant(tmp_path / "mixed", {**older, "best/notes.txt": b"mine"})
    before = snapshot(tmp_path / "mixed")
    assert RunDir(tmp_path / "mixed").existing_kind() == "files vitlab did not write"
    with pytest.raises(RunFolderError, match=r"not a vitlab run.*best/notes.txt"):
        RunDir(tmp_path / "mixed").open("classify", {}, overwrite=True)
    with pytest.raises(RunFolderError, match="not a vitlab run"):
        RunDir(tmp_path / "mixed").open("classify", {}, resume=True)
    assert snapshot(tmp_path / "mixed") == before


def test_links_and_damaged_markers_are_never_followed_or_trusted(tmp_path):
    outside = tmp_path / "outside"
    plant(outside, {"model.safetensors": b"the user's", "notes.txt": b"x"})
    linked = tmp_path / "linked"
    plant(linked, {"config.json": b"{}"})
    (linked / "best").symlink_to(outside)
    with pytest.raises(RunFolderError, match="not a vitlab run"):
        RunDir(linked).open("classify", {}, overwrite=True)
    run = RunDir(tmp_path / "marked").open("classify", {})
    run.close()
    (tmp_path / "marked" / "best").symlink_to(outside)
    RunDir(tmp_path / "marked").open("classify", {}, overwrite=True).close()
    assert snapshot(outside) == {"model.safetensors": b"the user's", "notes.txt": b"x"}
    (tmp_path / "marked" / MARKER).write_text("not json")
    before = snapshot(tmp_path / "marked")
    with pytest.raises(RunFolderError, match="damaged vitlab marker"):
        RunDir(tmp_path / "marked").open("classify", {}, overwrite=True)
    assert snapshot(tmp_path / "marked") == before


def test_a_refused_open_leaves_no_trace_in_a_new_or_empty_folder(tmp_path):
    (tmp_path / "empty").mkdir()
    run = RunDir(tmp_path / "empty").open("classify", {})
    run.discard_if_unused()
    run.close()
    assert os.listdir(tmp_path / "empty") == []
    run = RunDir(tmp_path / "new").open("classify", {})
    run.discard_if_unused()
    assert not (tmp_path / "new").exists()
