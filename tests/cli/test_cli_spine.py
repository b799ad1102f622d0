"""The spine through the command line: train -> convert -> evaluate / --init, run-folder refusals,
the lock, divergence, the error boundary, lazy imports, --config / --set."""

import contextlib
import io
import json
import math
import re
import subprocess
import sys

import pytest
import torch
from safetensors.torch import load_file

from vitlab import _version
from vitlab.cli.main import build_parser, main
from vitlab.cli.train import build_config
from vitlab.errors import CheckpointError
from vitlab.interop import timm_kwargs
from vitlab.models import build_registered
from vitlab.runs import RunDir, load_checkpoint, load_matching_weights
from vitlab.tasks.classify import ClassificationTask

TINY = [
    "--rows",
    "192",
    "--batch-size",
    "32",
    "--set",
    "depth=1",
    "--set",
    "embed_dim=32",
    "--set",
    "num_heads=2",
    "--threads",
    "1",
    "--device",
    "cpu",
    "--quiet",
]


def run_cli(*args: str) -> tuple[int, str, str]:
    """``main(args)`` with its stdout and stderr (for module-scoped fixtures, where capsys is not at hand)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def one_error_line(err: str) -> str:
    """The error's one line on stderr (warnings aside)."""
    lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and re.match(r"vitlab \w+: error: ", lines[0]), err
    return lines[0]


def printed_accuracy(out: str) -> float:
    return float(re.search(r"accuracy (\d\.\d{4})", out).group(1))


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished `vitlab train --out` run: 2 epochs of a tiny ViT on digits (warmup left at 3 epochs)."""
    folder = tmp_path_factory.mktemp("spine") / "run"
    code, out, err = run_cli("train", "--epochs", "2", *TINY, "--out", str(folder))
    assert code == 0, err
    return folder, out, err


def summary_acc(folder) -> float:
    return json.loads((folder / "summary.json").read_text())["test"]["acc"]


# -- convert, evaluate, init ---------------------------------------------------------------------------


@pytest.mark.slow
def test_timm_file_of_a_run_evaluates_to_the_run_and_starts_a_new_one(run, tmp_path, capsys):
    timm = pytest.importorskip("timm")
    folder, _, _ = run
    out = tmp_path / "out.safetensors"
    assert main(["convert", str(folder), str(out), "--to", "timm"]) == 0
    assert "timm state dict" in capsys.readouterr().out
    assert main(["evaluate", str(out), "--device", "cpu", "--out", str(tmp_path / "ev")]) == 0
    assert printed_accuracy(capsys.readouterr().out) == round(summary_acc(folder), 4)
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["accuracy"] == summary_acc(folder)

    assert (
        main(
            [
                "train",
                "--epochs",
                "1",
                *TINY,
                "--set",
                "warmup_epochs=0",
                "--init",
                str(out),
                "--out",
                str(tmp_path / "tuned"),
            ]
        )
        == 0
    )
    assert json.loads((tmp_path / "tuned" / "config.json").read_text())["init"] == str(out)
    fresh = build_registered("vit-digits", depth=1, embed_dim=32, num_heads=2, img_size=8, in_chans=1)
    assert load_matching_weights(fresh, out) == []  # every weight of the timm file fits

    vitlab_model = load_checkpoint(folder).model
    timm_model = timm.models.vision_transformer.VisionTransformer(**timm_kwargs(vitlab_model.config)).eval()
    timm_model.load_state_dict(load_file(str(out)), strict=True)
    images = torch.randn(4, 1, 8, 8)
    with torch.no_grad():
        assert (timm_model(images) - vitlab_model(images)).abs().max() <= 1e-5


@pytest.mark.slow
def test_vitlab_file_converted_from_a_run_evaluates(run, tmp_path, capsys):
    folder, _, _ = run
    assert main(["convert", str(folder), str(tmp_path / "x.safetensors")]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(tmp_path / "x.safetensors"), "--device", "cpu"]) == 0
    assert printed_accuracy(capsys.readouterr().out) == round(summary_acc(folder), 4)


# -- run folders -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_pretrain_over_a_train_run_is_refused(run, capsys):
    folder, _, _ = run
    config = (folder / "config.json").read_bytes()
    assert (
        main(
            [
                "pretrain",
                "mae",
                "--epochs",
                "1",
                "--rows",
                "64",
                "--threads",
                "1",
                "--device",
                "cpu",
                "--quiet",
                "--out",
                str(folder),
            ]
        )
        == 2
    )
    assert "already holds a classify run" in one_error_line(capsys.readouterr().err)
    assert (folder / "config.json").read_bytes() == config
    assert main(["evaluate", str(folder), "--device", "cpu"]) == 0
    assert printed_accuracy(capsys.readouterr().out) == round(summary_acc(folder), 4)


def test_train_into_a_run_of_another_kind_is_refused(tmp_path, capsys):
    RunDir(tmp_path).open("mae", {"epochs": 1}).close()
    assert main(["train", "--epochs", "1", *TINY, "--set", "warmup_epochs=0", "--out", str(tmp_path)]) == 2
    assert "already holds a mae run" in one_error_line(capsys.readouterr().err)
    assert json.loads((tmp_path / "run.json").read_text())["kind"] == "mae"


@pytest.mark.slow
def test_evaluate_into_a_segmentation_run_is_refused(run, tmp_path, capsys):
    folder, _, _ = run
    RunDir(tmp_path / "seg").open("segment", {"epochs": 1}).close()
    assert main(["evaluate", str(folder), "--device", "cpu", "--out", str(tmp_path / "seg")]) == 2
    assert "already holds a segment run" in one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "seg" / "metrics.json").exists()


@pytest.mark.slow
def test_overwrite_replaces_a_vitlab_run_but_never_foreign_files(tmp_path, capsys):
    RunDir(tmp_path / "old").open("segment", {"epochs": 9}).close()
    assert (
        main(
            ["train", "--epochs", "1", *TINY, "--set", "warmup_epochs=0", "--out", str(tmp_path / "old"), "--overwrite"]
        )
        == 0
    )
    assert json.loads((tmp_path / "old" / "run.json").read_text())["kind"] == "classify"
    assert load_checkpoint(tmp_path / "old").kind == "classifier"
    capsys.readouterr()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep")
    assert main(["train", "--epochs", "1", *TINY, "--out", str(tmp_path / "mine"), "--overwrite"]) == 2
    assert "files vitlab did not write" in one_error_line(capsys.readouterr().err)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir() if p.name != ".lock") == ["notes.txt"]


def test_a_second_process_on_the_same_folder_fails_fast(tmp_path, capsys):
    with RunDir(tmp_path).open("classify", {}):
        assert (
            main(["train", "--epochs", "1", *TINY, "--set", "warmup_epochs=0", "--out", str(tmp_path), "--overwrite"])
            == 2
        )
    line = one_error_line(capsys.readouterr().err)
    assert "in use" in line and str(tmp_path) in line


# -- divergence ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_divergence_exits_1_with_one_line_and_keeps_finite_checkpoints(tmp_path, capsys, monkeypatch):
    step = ClassificationTask.step

    def nan_in_epoch_2(self, net, batch, epoch):
        loss, sums, n = step(self, net, batch, epoch)
        return (loss * math.nan if epoch == 1 else loss), sums, n

    monkeypatch.setattr(ClassificationTask, "step", nan_in_epoch_2)
    out = tmp_path / "run"
    assert main(["train", "--epochs", "3", *TINY, "--set", "warmup_epochs=0", "--out", str(out)]) == 1
    line = one_error_line(capsys.readouterr().err)
    assert re.search(r"diverged: loss nan at epoch 2, batch 1 \(learning rate \S+\)", line), line
    for which in ("best", "last"):
        tensors = load_file(str(out / which / "model.safetensors"))
        assert all(torch.isfinite(t).all() for t in tensors.values())
        assert load_checkpoint(out / which).metadata["provenance"]["epoch"] == 1


# -- the error boundary and lazy commands ------------------------------------------------------------


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["evaluate", str(tmp_path / "absent")]) == 2
    assert "no checkpoint at" in one_error_line(capsys.readouterr().err)
    (tmp_path / "bad.safetensors").write_bytes(b"\x00" * 3)
    assert main(["evaluate", str(tmp_path / "bad.safetensors")]) == 2
    assert "bad.safetensors" in one_error_line(capsys.readouterr().err)
    assert main(["train", "--set", "optimizer=lbfgs", "--threads", "1"]) == 2
    assert "adamw" in one_error_line(capsys.readouterr().err)
    with pytest.raises(CheckpointError, match="absent"):  # --debug keeps the traceback
        main(["--debug", "evaluate", str(tmp_path / "absent")])


def test_help_imports_neither_torch_nor_matplotlib():
    code = (
        "import sys, contextlib, io\n"
        "from vitlab.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "assert 'train' in out.getvalue() and 'convert' in out.getvalue()\n"
        "print('torch' in sys.modules, 'matplotlib' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_version_prints_the_package_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"vitlab {_version.__version__}"


# -- --set and --config ----------------------------------------------------------------------------


def train_config(*argv: str):
    return build_config(build_parser("train").parse_args(["train", *argv]))


def test_set_reaches_train_config_fields_and_model_fields():
    config = train_config("--set", "weight_decay=0.1", "--set", "drop_path_rate=0.1", "--set", "warmup_epochs=1")
    assert config.weight_decay == 0.1 and config.warmup_epochs == 1.0
    assert config.model_overrides == {"drop_path_rate": 0.1}
    assert train_config().weight_decay == 0.05


@pytest.mark.slow
def test_config_file_reruns_a_run_to_identical_metrics(run, tmp_path):
    folder, _, _ = run
    code, _, err = run_cli(
        "train", "--config", str(folder / "config.json"), "--threads", "1", "--quiet", "--out", str(tmp_path / "again")
    )
    assert code == 0, err
    again = json.loads((tmp_path / "again" / "config.json").read_text())
    original = json.loads((folder / "config.json").read_text())
    assert {**again, "out_dir": None} == {**original, "out_dir": None}

    def val_accs(path):
        return [json.loads(line)["val_acc"] for line in (path / "metrics.jsonl").read_text().splitlines()]

    assert val_accs(tmp_path / "again") == val_accs(folder) and len(val_accs(folder)) == 2
    a, b = (
        load_file(str(folder / "best" / "model.safetensors")),
        load_file(str(tmp_path / "again" / "best" / "model.safetensors")),
    )
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_warmup_as_long_as_the_run_warns_on_one_line(run):
    _, _, err = run
    warned = [line for line in err.splitlines() if "warmup" in line]
    assert len(warned) == 1 and warned[0].startswith("vitlab train: warning: warmup_epochs=3 >= epochs=2: ")
