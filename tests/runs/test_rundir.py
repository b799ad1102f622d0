"""The run folder: one run per folder, refusal of foreign runs, overwrite, lock, resume checks, state."""

import json
import os

import pytest
import torch

from vitlab import __version__
from vitlab.errors import CheckpointError, RunFolderError
from vitlab.models import build_registered
from vitlab.runs import DataConfig, RunDir, load_checkpoint

DATA = DataConfig((8, 8), 1, (0.5,), (0.25,), [str(i) for i in range(10)], dataset="digits")


def started(path, kind="classify", config=None, **kw) -> RunDir:
    run = RunDir(path).open(kind, config if config is not None else {"epochs": 2, "device": "cpu"}, **kw)
    run.close()
    return run


def test_open_writes_run_and_config(tmp_path):
    with RunDir(tmp_path / "r").open("classify", {"epochs": 3, "lr": float("nan")}) as run:
        assert run.existing_kind() == "classify"
    meta = json.loads((tmp_path / "r" / "run.json").read_text())
    assert meta["kind"] == "classify" and meta["vitlab"] == __version__
    assert json.loads((tmp_path / "r" / "config.json").read_text()) == {"epochs": 3, "lr": None}


@pytest.mark.parametrize("kind", ["classify", "segment", "mae"])
def test_a_folder_holding_a_run_is_refused(tmp_path, kind):
    started(tmp_path, kind)
    before = (tmp_path / "config.json").read_bytes()
    hint = r"--resume.*--overwrite" if kind == "classify" else r"another folder, or replace it \(--overwrite"
    with pytest.raises(RunFolderError, match=rf"already holds a {kind} run.*{hint}"):
        RunDir(tmp_path).open("classify", {"epochs": 9})
    assert (tmp_path / "config.json").read_bytes() == before


def test_overwrite_replaces_a_vitlab_run(tmp_path):
    started(tmp_path, "segment")
    (tmp_path / "best").mkdir()
    (tmp_path / "best" / "model.safetensors").write_bytes(b"old")
    started(tmp_path, "classify", {"epochs": 5}, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", ".vitlab-run", "config.json", "run.json"]
    assert json.loads((tmp_path / "run.json").read_text())["kind"] == "classify"


def test_overwrite_replaces_an_older_vitlab_run(tmp_path):
    (tmp_path / "metrics.json").write_text("{}")  # written before run.json existed
    assert RunDir(tmp_path).existing_kind() == "an older vitlab run"
    started(tmp_path, overwrite=True)
    assert not (tmp_path / "metrics.json").exists()


def test_overwrite_never_deletes_foreign_files(tmp_path):
    (tmp_path / "thesis.tex").write_text("years of work")
    with pytest.raises(RunFolderError, match="not a vitlab run: it holds files vitlab did not write.*nothing in it"):
        RunDir(tmp_path).open("classify", {}, overwrite=True)
    assert os.listdir(tmp_path) == ["thesis.tex"]  # no lock file either


def test_a_second_user_of_the_folder_fails_at_once(tmp_path):
    with RunDir(tmp_path).open("classify", {}):
        with pytest.raises(RunFolderError, match=rf"in use by another vitlab process \(pid {os.getpid()}\)"):
            RunDir(tmp_path).open("classify", {}, overwrite=True)
    started(tmp_path, overwrite=True)  # released on close


def test_resume_checks_kind_state_and_settings(tmp_path):
    with pytest.raises(RunFolderError, match="holds no run"):
        RunDir(tmp_path / "empty").open("classify", {}, resume=True)
    run_path = tmp_path / "run"
    started(run_path, "classify", {"epochs": 2, "device": "cpu"})
    run = RunDir(run_path).open("classify", {"epochs": 2, "device": "cpu"}, resume=True)
    assert run.resumed and not run.has_state()  # a run killed before its first epoch ended starts again
    run.close()
    RunDir(run_path).save_state({"epoch": 1})
    with pytest.raises(RunFolderError, match="as a mae run: it holds a classify run"):
        RunDir(run_path).open("mae", {"epochs": 2}, resume=True)
    with pytest.raises(RunFolderError, match=r"epochs \(run has 2, given 3\)"):
        RunDir(run_path).open("classify", {"epochs": 3, "device": "cpu"}, resume=True)
    RunDir(run_path).open("classify", {"epochs": 2, "device": "cuda"}, resume=True, resume_free=("device",)).close()
    with pytest.raises(RunFolderError, match="contradict"):
        RunDir(run_path).open("classify", {}, resume=True, overwrite=True)


def test_an_older_runs_folder_needs_its_state_to_resume(tmp_path):
    (tmp_path / "config.json").write_text('{"epochs": 2}')
    with pytest.raises(RunFolderError, match="no last/state.pt"):
        RunDir(tmp_path).open("classify", {"epochs": 2}, resume=True)


def test_open_removes_temp_files_of_a_killed_write(tmp_path):
    run = started(tmp_path)
    (tmp_path / "last").mkdir()
    (tmp_path / "last" / f".vitlab-{run.run_id}-state.pt.x1y2.tmp").write_bytes(b"half written")
    (tmp_path / "user.tmp").write_bytes(b"the user's")
    with RunDir(tmp_path).open("classify", {}, overwrite=True):
        pass
    assert [p.name for p in tmp_path.rglob("*.tmp")] == ["user.tmp"]


class NotATensor:
    pass


def test_state_loads_optimizer_state_but_never_unpickles_objects(tmp_path):
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.rand(4, 3)).sum().backward()
    opt.step()
    run = RunDir(tmp_path)
    run.save_state({"epoch": 2, "optimizer": opt.state_dict(), "history": [{"acc": 0.5}]})
    state = run.load_state()
    assert state["epoch"] == 2 and state["history"] == [{"acc": 0.5}]
    torch.testing.assert_close(state["optimizer"]["state"][0]["exp_avg"], opt.state_dict()["state"][0]["exp_avg"])
    torch.save({"evil": NotATensor()}, tmp_path / "last" / "state.pt")
    with pytest.raises(CheckpointError, match="state.pt cannot be read"):
        run.load_state()


def test_checkpoints_history_and_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with RunDir(tmp_path / "r").open("classify", {"epochs": 1}) as run:
            model = build_registered("vit-digits", depth=1, embed_dim=32, num_heads=2).eval()
            path = run.save_checkpoint("best", model, "classifier", DATA.to_dict(), provenance={"epoch": 1})
            run.save_state({"epoch": 1})
            run.write_history([{"epoch": 1, "val_acc": float("nan")}])
    finally:
        os.umask(old)
    assert path == tmp_path / "r" / "best" / "model.safetensors"
    loaded = load_checkpoint(tmp_path / "r")
    assert loaded.metadata["provenance"]["epoch"] == 1 and loaded.metadata["provenance"]["run"] == str(tmp_path / "r")
    assert json.loads((tmp_path / "r" / "metrics.jsonl").read_text()) == {"epoch": 1, "val_acc": None}
    assert (tmp_path / "r" / "metrics.csv").read_text().splitlines()[0] == "epoch,val_acc"
    for name in ("run.json", "config.json", "best/model.safetensors", "last/state.pt", "metrics.jsonl", ".lock"):
        assert (tmp_path / "r" / name).stat().st_mode & 0o777 == 0o644, name
