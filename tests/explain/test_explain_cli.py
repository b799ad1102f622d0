"""``vitlab explain`` on a checkpoint in a run folder: one example, then the audit."""

import json

import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import normalize
from vitlab.explain.record import attention_weights
from vitlab.runs import DataConfig, save_checkpoint


@pytest.fixture(scope="module")
def run_folder(digits_run, tmp_path_factory):
    """A run folder as `vitlab train --out` leaves it: config.json and best/model.safetensors."""
    folder = tmp_path_factory.mktemp("run")
    splits, config = digits_run.splits, digits_run.config
    (folder / "config.json").write_text(json.dumps(config.to_dict()))
    save_checkpoint(
        digits_run.model,
        folder / "best" / "model.safetensors",
        "classifier",
        DataConfig.from_splits(splits),
        name=config.model,
        provenance={"epoch": config.epochs},
    )
    return folder


def test_explain_one_example(run_folder, tmp_path, capsys):
    out = tmp_path / "one"
    assert main(["explain", str(run_folder), "--index", "3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "val #3" in printed and "last-layer head spreads" in printed
    report = json.loads((out / "explain.json").read_text())
    assert set(report["maps"]) == {"attention", "rollout", "gradient", "gradxinput", "occlusion"}
    for summary in report["maps"].values():
        grid = summary["grid"]
        assert len(grid) == 4 and all(len(row) == 4 for row in grid)
        r, c = summary["top_patch"]
        assert grid[r][c] == summary["max"] == max(max(row) for row in grid)
    assert len(report["heads"]["spread"]) == 2 and len(report["heads"]["spread"][0]) == 2
    assert sum(report["probabilities"]) == pytest.approx(1, abs=1e-5)
    assert all((out / name).is_file() for name in ("maps.png", "heads.png", "explain.json"))


def test_explain_one_method_and_textbook(run_folder, tmp_path):
    out = tmp_path / "grad"
    assert main(["explain", str(run_folder), "--method", "gradient", "--textbook", "--out", str(out)]) == 0
    report = json.loads((out / "explain.json").read_text())
    assert list(report["maps"]) == ["gradient"] and "heads" not in report
    assert (out / "positions.png").is_file() and (out / "temperature.png").is_file()


@pytest.mark.slow
def test_explain_audit(run_folder, tmp_path, capsys):
    out = tmp_path / "audit"
    assert (
        main(["explain", str(run_folder), "--audit", "--samples", "20", "--sanity-epochs", "1", "--out", str(out)]) == 0
    )
    assert "| occlusion |" in capsys.readouterr().out
    saved = json.loads((out / "audit.json").read_text())
    assert saved["samples"] == 20 and saved["sanity_epochs"] == 1
    assert all(row["permuted_rho"] is not None for row in saved["methods"])
    assert (out / "audit.md").is_file() and (out / "curves.png").is_file()


def test_explain_errors_name_the_way_out(run_folder, tmp_path, capsys):
    assert main(["explain", str(run_folder), "--index", "100000", "--out", str(tmp_path)]) == 2
    assert "use 0.." in capsys.readouterr().err
    assert main(["explain", str(tmp_path / "missing"), "--out", str(tmp_path)]) == 2


def test_explain_attention_from_a_chosen_patch(run_folder, digits_run, tmp_path):
    out = tmp_path / "query"
    assert (
        main(["explain", str(run_folder), "--method", "attention", "--query", "5", "--index", "7", "--out", str(out)])
        == 0
    )
    report = json.loads((out / "explain.json").read_text())
    assert report["query"] == 5
    splits = digits_run.splits
    inputs = normalize(splits.val.images[7:8], splits.mean, splits.std)
    _, weights = attention_weights(digits_run.model, inputs)
    expected = weights[-1][0, :, 5].mean(0).reshape(4, 4)  # mean-pooled: no prefix tokens
    torch.testing.assert_close(torch.tensor(report["maps"]["attention"]["grid"]), expected)
    assert main(["explain", str(run_folder), "--query", "cls", "--out", str(tmp_path)]) == 2
