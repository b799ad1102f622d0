"""Values the checks used not to reach, each one line: ``predict --top-k`` above the class count, a model with
more outputs than class names, scoring (temperature scaling, the linear probe) a model with non-finite weights,
and a linear probe on one row."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, save_checkpoint

DIGITS = [str(i) for i in range(10)]


def checkpoint(path, classes=DIGITS, poison=False, outputs=10):
    torch.manual_seed(0)
    model = build_registered("vit-digits", depth=1, embed_dim=16, num_heads=2, num_classes=outputs)
    if poison:
        with torch.no_grad():
            model.head.weight[0, 0] = float("nan")
    data = DataConfig((8, 8), 1, (0.5,), (0.25,), list(classes), dataset="digits")
    return save_checkpoint(model, path, "classifier", data)


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "digit.png"
    Image.fromarray((np.random.default_rng(0).random((8, 8)) * 255).astype(np.uint8)).save(path)
    return path


def test_top_k_above_the_class_count_shows_every_class(tmp_path, image, capsys):
    model = checkpoint(tmp_path / "m.safetensors")
    assert main(["predict", str(model), str(image), "--top-k", "12", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.split()
    assert sorted(out[1::2]) == DIGITS


def test_a_model_with_more_outputs_than_class_names_names_the_rest_by_index(tmp_path, image, capsys):
    model = checkpoint(tmp_path / "m.safetensors", classes=("cat", "dog", "emu"))
    assert main(["predict", str(model), str(image), "--top-k", "10", "--json", "--device", "cpu"]) == 0
    captured = capsys.readouterr()
    shown = {entry["class"] for entry in json.loads(captured.out)[0]["top"]}
    assert shown == {"cat", "dog", "emu", *map(str, range(3, 10))}
    assert "names 3 classes but the model has 10 outputs" in captured.err


@pytest.mark.parametrize(
    "flags, named",
    [
        (["--temperature-scale"], "holds non-finite weights"),
        ([], "holds non-finite weights"),
        (["--linear-probe"], "holds non-finite weights"),
    ],
)
def test_scoring_a_model_with_non_finite_weights_is_one_line(tmp_path, flags, named, capsys):
    model = checkpoint(tmp_path / "m.safetensors", poison=True)
    assert main(["evaluate", str(model), *flags, "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "head.weight" in lines[0], lines


def test_a_linear_probe_on_one_row_is_one_line(tmp_path, capsys):
    model = checkpoint(tmp_path / "m.safetensors")
    assert main(["evaluate", str(model), "--linear-probe", "--rows", "1", "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "needs at least 2" in lines[0], lines
    assert main(["evaluate", str(model), "--linear-probe", "--rows", "20", "--device", "cpu"]) == 0


@pytest.mark.parametrize("top_k", ["0", "-3"])
def test_top_k_below_one_is_one_line(tmp_path, image, top_k, capsys):
    model = checkpoint(tmp_path / "m.safetensors")
    assert main(["predict", str(model), str(image), "--top-k", top_k, "--device", "cpu"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and f"--top-k must be a positive integer in [1, 1000], got {top_k}" in lines[0], lines
