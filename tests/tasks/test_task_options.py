"""A task's own predict option is declared in its one file: a flagger (is this digit odd?) whose ``--threshold``
the command line offers, checks and hands to the task, without a line of vitlab changed for it."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from PIL import Image

from vitlab.checks import Float
from vitlab.cli.main import main
from vitlab.engine import RunConfig
from vitlab.models.cnn import CNNConfig, SimpleCNN
from vitlab.runs import DataConfig, Loaded, save_checkpoint
from vitlab.tasks import PredictRequest, TaskSpec, fit_summary, registered
from vitlab.tasks.requests import option


@dataclass
class FlagPredict(PredictRequest):
    """Flag an image when the model's probability of ``yes`` reaches ``threshold``."""

    threshold: float = option(0.5, "flag an image when P(yes) reaches this", Float(0.0, 1.0))


def predict(loaded: Loaded, request: FlagPredict) -> str:
    pixels = torch.tensor(list(Image.open(request.images[0]).convert("L").getdata()), dtype=torch.float32) / 255
    yes = loaded.model(pixels.view(1, 1, 8, 8)).softmax(1)[0, 1].item()
    return f"{'flagged' if yes >= request.threshold else 'not flagged'} (P(yes) {yes:.3f})"


SPEC = TaskSpec(
    "flag",
    RunConfig,
    build=None,  # type: ignore[arg-type]  # trained elsewhere: this test is about its predict options
    kinds=("flagger",),
    summary=fit_summary("the best epoch's weights"),
    line=str,
    predict=predict,
    predict_request=FlagPredict,
)


@pytest.fixture
def flagger(tmp_path):
    torch.manual_seed(0)
    model = SimpleCNN(CNNConfig(img_size=8, in_chans=1, num_classes=2, widths=(8, 16)))
    picture = tmp_path / "digit.png"
    Image.fromarray((torch.rand(8, 8) * 255).byte().numpy()).save(picture)
    with registered(SPEC):
        path = save_checkpoint(
            model, tmp_path / "flagger.safetensors", "flagger", DataConfig((8, 8), 1, (0.0,), (1.0,), ["no", "yes"])
        )
        yield str(path), str(picture)


def test_predict_help_offers_the_tasks_own_option(flagger, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["predict", "--help"])
    assert exit.value.code == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--threshold THRESHOLD flag: flag an image when P(yes) reaches this: a number in [0, 1] (default: 0.5)" in (
        help_text
    )


@pytest.mark.parametrize(("threshold", "said"), [("0", "flagged"), ("1", "not flagged")])
def test_the_option_reaches_the_task(flagger, threshold, said, capsys):
    checkpoint, picture = flagger
    assert main(["predict", checkpoint, picture, "--threshold", threshold, "--device", "cpu"]) == 0
    assert capsys.readouterr().out.startswith(f"{said} (P(yes) ")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--threshold", "2"], "--threshold must be a number in [0, 1], got 2.0"),
        (["--top-k", "3"], "--top-k is not an option of a flag checkpoint (task 'flag' takes --threshold)"),
    ],
)
def test_a_bad_or_foreign_option_is_one_line(flagger, options, said, capsys):
    checkpoint, picture = flagger
    assert main(["predict", checkpoint, picture, *options, "--device", "cpu"]) == 2
    assert capsys.readouterr().err.strip() == f"vitlab predict: error: {said}"


def test_another_tasks_options_are_refused_for_a_classifier(tmp_path, flagger, capsys):
    from vitlab import create_model

    model = create_model("cnn-digits")
    classes = [str(i) for i in range(10)]
    path = save_checkpoint(
        model, tmp_path / "c.safetensors", "classifier", DataConfig((8, 8), 1, (0.0,), (1.0,), classes)
    )
    assert main(["predict", str(path), flagger[1], "--threshold", "0.1", "--device", "cpu"]) == 2
    assert "--threshold is not an option of a classify checkpoint" in capsys.readouterr().err
