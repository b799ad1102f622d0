"""``vitlab explain`` refuses what makes no sense, in one line, before any work, and never writes over
another run's folder."""

import pytest

from vitlab.cli.main import main
from vitlab.errors import ConfigError
from vitlab.explain.report import check_explain_options
from vitlab.models import build_registered
from vitlab.runs import DataConfig, RunDir, save_checkpoint


@pytest.mark.parametrize(
    "option, value",
    [
        ("index", -1),
        ("patch_size", 0),
        ("samples", 0),
        ("steps", 0),
        ("sanity_epochs", -1),
        ("seed", -1),
        ("threshold", float("nan")),
        ("threshold", 1.5),
        ("threshold", -2.0),
    ],
)
def test_out_of_range_options_are_refused_by_name(option, value):
    with pytest.raises(ConfigError, match=f"--{option.replace('_', '-')}"):
        check_explain_options(**{option: value})


def test_in_range_options_pass():
    check_explain_options(index=0, patch_size=None, samples=1, steps=None, sanity_epochs=0, seed=0, threshold=-1.0)


@pytest.mark.parametrize(
    "argv",
    [
        ["--patch-size", "0"],
        ["--audit", "--threshold", "nan"],
        ["--audit", "--sanity-epochs", "-1"],
        ["--audit", "--samples", "0"],
        ["--index", "-3"],
    ],
)
def test_cli_refuses_bad_options_with_one_line(argv, tmp_path, capsys):
    assert main(["explain", str(tmp_path / "no-such-run"), "--out", str(tmp_path / "out"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--" in err
    assert not (tmp_path / "out").exists()


def test_explain_into_another_runs_folder_is_refused(tmp_path, capsys):
    checkpoint = save_checkpoint(
        build_registered("vit-digits"),
        tmp_path / "m.safetensors",
        "classifier",
        DataConfig((8, 8), 1, (0.0,), (1.0,), [str(i) for i in range(10)], dataset="digits"),
    )
    other = tmp_path / "seg"
    RunDir(other).open("segment", {"epochs": 1}).close()
    before = sorted(p.name for p in other.iterdir())
    assert main(["explain", str(checkpoint), "--out", str(other)]) == 2
    assert "already holds a segment run" in capsys.readouterr().err
    assert sorted(p.name for p in other.iterdir()) == before
