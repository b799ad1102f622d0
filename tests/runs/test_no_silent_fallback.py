"""A run folder is read from ``last/`` in place of ``best/`` only where that is the run's own answer: a summary
that says the test ran on ``best/`` while ``best/`` is missing is refused naming what is missing; a run without
a summary (it did not finish) is read from ``last/`` with a warning that says so."""

import shutil
import warnings

import pytest

from vitlab.cli.main import main
from vitlab.errors import CheckpointError
from vitlab.models import build_registered
from vitlab.runs import DataConfig, RunDir, load_checkpoint


def write_run(folder, test_on: str) -> None:
    data = DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)], dataset="digits")
    with RunDir(folder).open("classify", {}) as run:
        model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2)
        blob = run.checkpoint_file(model, "classifier", data, provenance={"epoch": 2})
        run.commit(2, {"best/model.safetensors": blob, "last/model.safetensors": blob})
        run.write_summary({"best_epoch": 2, "test_on": test_on})


def test_a_summary_naming_best_without_best_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    write_run(run, "the checkpoint chosen by validation (best/)")
    shutil.rmtree(run / "best")
    with pytest.raises(CheckpointError, match=r"summary.json says the test ran on best/ \(epoch 2\), but best/"):
        load_checkpoint(run)
    assert main(["evaluate", str(run), "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "best/model.safetensors is missing" in lines[0] and str(run / "last") in lines[0]
    assert load_checkpoint(run / "last").metadata["provenance"]["epoch"] == 2  # the way out it names works


def test_a_run_without_a_summary_is_read_from_last_saying_so(tmp_path):
    run = tmp_path / "run"
    write_run(run, "the checkpoint chosen by validation (best/)")
    shutil.rmtree(run / "best")
    (run / "summary.json").unlink()
    with pytest.warns(UserWarning, match=r"has no summary.json \(the run did not finish\) and no best/: reading last/"):
        loaded = load_checkpoint(run)
    assert loaded.path == run / "last" / "model.safetensors"


def test_a_run_whose_summary_names_the_final_model_reads_last_quietly(tmp_path):
    run = tmp_path / "run"
    write_run(run, "the final model (validation runs at the end)")
    shutil.rmtree(run / "best")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(run).path == run / "last" / "model.safetensors"
