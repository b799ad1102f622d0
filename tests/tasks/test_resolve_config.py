"""One function resolves a run's config for the command line, Python callers and the explorer:
``resolve_config(task, file, options, sets, out_dir=, resume=, overwrite=)``."""

from __future__ import annotations

import json

import pytest

from vitlab.errors import ConfigError
from vitlab.tasks import resolve_config


def test_file_then_options_then_sets(tmp_path):
    file = tmp_path / "run.yaml"
    file.write_text("lr: 0.1\nepochs: 5\nseed: 3\nout_dir: elsewhere\n")
    config = resolve_config("classify", file, {"lr": 0.2, "epochs": None}, ["lr=0.05", "augment.color_jitter=0.4"])
    assert (config.lr, config.epochs, config.seed) == (0.05, 5, 3)
    assert config.augment_overrides == {"color_jitter": 0.4}
    assert config.out_dir is None  # a file names no run folder: out_dir is the caller's


def test_model_fields_and_presets(tmp_path):
    config = resolve_config("classify", options={"depth": 2, "model": "vit-digits"}, out_dir=tmp_path / "r")
    assert config.model_overrides == {"depth": 2} and config.out_dir == str(tmp_path / "r")
    assert resolve_config("detect", options={"epochs": 1}).task == "detect"  # the task's preset


def test_resume_reads_the_runs_own_config_and_applies_a_settable_change(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"lr": 0.01, "epochs": 7, "out_dir": str(run), "resume": False}))
    config = resolve_config("classify", sets=["lr=0.001"], out_dir=run, resume=True)
    assert (config.lr, config.epochs, config.resume) == (0.001, 7, True)
    assert "lr" in config.resume_sets
    with pytest.raises(ConfigError, match="drop --config"):
        resolve_config("classify", {"lr": 1.0}, out_dir=run, resume=True)
    with pytest.raises(ConfigError, match="resume needs the run folder"):
        resolve_config("classify", resume=True)


def test_a_field_the_caller_owns_is_not_set_by_a_set():
    with pytest.raises(ConfigError, match="out_dir is set by --out DIR, not by --set"):
        resolve_config("classify", sets=["out_dir=x"])
