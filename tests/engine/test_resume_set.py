"""``--resume --set lr=...`` on purpose: the resumed run continues from its recorded state at the new learning
rate (applied to the optimizer and its schedule, recorded in config.json); other changed settings, and a
config.json edited by hand, are still refused naming the field."""

import json

import pytest

from vitlab.cli.main import main
from vitlab.engine import TqdmReporter

TINY = ["--rows", "64", "--batch-size", "32", "--set", "depth=1", "--set", "embed_dim=16", "--set", "num_heads=2"]
TINY += ["--set", "warmup_epochs=0", "--quiet", "--device", "cpu"]


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def stopped(tmp_path, monkeypatch):
    """A classification run of 4 epochs interrupted after its second (the epoch is committed first)."""
    original = TqdmReporter.epoch

    def stop(self, record):
        original(self, record)
        if record["epoch"] == 2:
            raise KeyboardInterrupt

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        patch.setattr(TqdmReporter, "epoch", stop)
        assert main(["train", *TINY, "--epochs", "4", "--out", str(out)]) == 130
    assert [r["epoch"] for r in records(out)] == [1, 2]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--set", "lr=0.0001"], ["--lr", "0.0001"]], ids=["set", "flag"])
def test_resume_with_a_new_learning_rate_applies_it(stopped, how, tmp_path, capsys):
    capsys.readouterr()
    assert main(["train", *TINY, "--resume", *how, "--out", str(stopped)]) == 0
    err = capsys.readouterr().err
    assert "resumed with lr (run has 0.003, given 0.0001); config.json records it" in err, err
    assert json.loads((stopped / "config.json").read_text())["lr"] == 0.0001
    resumed = records(stopped)
    assert [r["epoch"] for r in resumed] == [1, 2, 3, 4]
    # the rate of epochs 3 and 4 is the one a run at lr 1e-4 has at those steps: the schedule continues
    reference = tmp_path / "reference"
    assert main(["train", *TINY, "--epochs", "4", "--set", "lr=0.0001", "--out", str(reference)]) == 0
    expected = records(reference)
    for got, want in zip(resumed[2:], expected[2:]):
        assert got["lr"] == pytest.approx(want["lr"], rel=1e-6), (got["lr"], want["lr"])
    assert resumed[1]["lr"] != pytest.approx(expected[1]["lr"])  # the first two epochs ran at 3e-3
    state_config = json.loads((stopped / "config.json").read_text())
    assert state_config["lr"] == 0.0001


@pytest.mark.slow
def test_other_changes_on_resume_stay_refused_naming_them(stopped, capsys):
    capsys.readouterr()
    for how, named in (
        (["--set", "depth=2"], "model_overrides.depth (run has 1, given 2)"),
        (["--set", "weight_decay=0.1"], "weight_decay (run has 0.05, given 0.1)"),
        (["--epochs", "6"], "epochs (run has 4, given 6)"),
    ):
        assert main(["train", *TINY, "--resume", *how, "--out", str(stopped)]) == 2
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and named in lines[0], lines
    config = json.loads((stopped / "config.json").read_text())
    config["lr"] = 0.0001  # by hand, not on the command line: refused
    (stopped / "config.json").write_text(json.dumps(config))
    assert main(["train", *TINY, "--resume", "--out", str(stopped)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "lr (run has 0.003, given 0.0001)" in lines[0] and "edited" in lines[0], lines
