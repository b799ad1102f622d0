"""A new task is one file: rotation prediction (which quarter-turn was applied to a digit), declared here and
nowhere else, trains, resumes, evaluates and predicts through the command line."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.engine import RunConfig, Task
from vitlab.models.cnn import CNNConfig, SimpleCNN
from vitlab.runs import DataConfig, Loaded
from vitlab.tasks import EvaluateRequest, PredictRequest, RunResult, TaskSpec, fit_summary, registered

pytestmark = pytest.mark.slow


@dataclass
class RotationConfig(RunConfig):
    """Rotation prediction on digits: a small CNN tells which of four quarter-turns an image shows."""

    epochs: int = 2
    batch_size: int = 64
    lr: float = 3e-3
    warmup_epochs: float = 0.0


def rotate(images: torch.Tensor, turns: torch.Tensor) -> torch.Tensor:
    """Each image ``(B, C, H, W)`` turned ``turns[i]`` quarter-turns."""
    return torch.stack([torch.rot90(x, int(k), dims=(1, 2)) for x, k in zip(images, turns)])


class RotationTask(Task):
    run_kind, checkpoint_kind, monitor = "rotation", "rotator", "val_acc"

    def __init__(self, config: RotationConfig) -> None:
        splits = load_dataset(config.dataset, seed=config.seed, rows=config.rows)
        self.train_images, self.val_images = splits.train.images, splits.val.images
        self.model = SimpleCNN(CNNConfig(img_size=8, in_chans=1, num_classes=4, widths=(8, 16)))

    def train_size(self) -> int:
        return len(self.train_images)

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        turns = index % 4
        return rotate(self.train_images[index], turns), turns

    def step(self, net: nn.Module, batch: Any, epoch: int) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        images, turns = batch
        loss = F.cross_entropy(net(images), turns)
        return loss, {"loss": loss.detach() * len(turns)}, len(turns)

    def validate(self, model: nn.Module) -> dict[str, float]:
        turns = torch.arange(len(self.val_images)) % 4
        with torch.no_grad():
            acc = (model(rotate(self.val_images, turns)).argmax(1) == turns).float().mean()
        return {"val_acc": float(acc)}

    def data_config(self) -> DataConfig:
        return DataConfig((8, 8), 1, (0.0,), (1.0,), ["0", "90", "180", "270"])


def predict(loaded: Loaded, request: PredictRequest) -> str:
    data = loaded.data
    image = data.eval_transform()(data.load_image(request.images[0]))  # (1, 8, 8): as the model was fed
    turn = loaded.model(image[None]).argmax(1).item()
    return f"{request.images[0]}: turned {loaded.data.classes[turn]} degrees"


SPEC = TaskSpec(
    "rotation",
    RotationConfig,
    build=lambda config, data, reporter: RotationTask(config),
    kinds=("rotator",),
    summary=fit_summary("the best epoch's weights"),
    line=lambda result: f"rotation: best val acc {result.best_val_acc:.3f} (epoch {result.best_epoch})",
    evaluate=lambda loaded, request: f"{loaded.kind} with {len(loaded.data.classes)} turns, split {request.split}",
    predict=predict,
    options=("dataset", "rows", "epochs", "lr", "seed"),
)


@pytest.fixture
def rotation():
    with registered(SPEC):
        yield SPEC


def test_a_toy_task_trains_resumes_evaluates_and_predicts_through_the_cli(rotation, tmp_path, capsys):
    out = str(tmp_path / "run")
    assert main(["train", "--task", "rotation", "--epochs", "1", "--out", out, "--quiet", "--device", "cpu"]) == 0
    assert "rotation: best val acc" in capsys.readouterr().out
    assert main(["train", "--task", "rotation", "--epochs", "1", "--out", out, "--resume", "--quiet"]) == 0
    assert "(epoch 1)" in capsys.readouterr().out
    assert main(["evaluate", out, "--split", "val"]) == 0
    assert capsys.readouterr().out.strip() == "rotator with 4 turns, split val"
    picture = tmp_path / "digit.png"
    Image.fromarray((torch.rand(8, 8) * 255).byte().numpy()).save(picture)
    assert main(["predict", out, str(picture)]) == 0
    assert "degrees" in capsys.readouterr().out


def test_the_run_result_is_the_one_result_type(rotation):
    from vitlab.tasks import run

    result = run(rotation, RotationConfig(epochs=1, rows=200, device="cpu"))
    assert isinstance(result, RunResult) and result.task == "rotation" and 0.0 <= result.best_val_acc <= 1.0


def test_a_task_once_unregistered_is_refused_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit:
        main(["train", "--task", "rotation", "--out", str(tmp_path / "r")])
    assert exit.value.code == 2
    assert "invalid choice: 'rotation'" in capsys.readouterr().err


def test_requests_carry_the_command_options():
    assert EvaluateRequest("run").split == "test" and PredictRequest("run", ["a.png"]).out is None
