"""The one training loop through ``vitlab.tasks.train``: learning, run folder, exact resume, EMA,
a kill between two writes, divergence, distillation."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from vitlab.cli.main import main
from vitlab.data import AugmentConfig, load_dataset
from vitlab.engine import Reporter
from vitlab.errors import ConfigError, DivergenceError, RunFolderError
from vitlab.runs import RunDir, load_checkpoint
from vitlab.tasks import evaluate_checkpoint, run
from vitlab.tasks.classify import RECIPES, ClassificationTask, TrainConfig, distillation_loss

TINY = {"depth": 1, "embed_dim": 32, "num_heads": 2}


@pytest.fixture(scope="module")
def splits():
    return load_dataset("digits", rows=192)


def tiny_config(**overrides) -> TrainConfig:
    base = dict(model_overrides=TINY, rows=192, epochs=2, batch_size=32, warmup_epochs=1.0, device="cpu")
    return TrainConfig(**{**base, **overrides})


def weights(path) -> dict[str, torch.Tensor]:
    return load_file(str(path))


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_config_validation_names_the_way_out():
    with pytest.raises(ConfigError, match="adamw"):
        TrainConfig(optimizer="lbfgs")
    with pytest.raises(ConfigError, match="plain"):
        TrainConfig.from_recipe("fast")
    with pytest.raises(ConfigError, match="out_dir"):
        TrainConfig(resume=True)
    with pytest.raises(ConfigError, match="light"):
        TrainConfig(augment="heavy")
    with pytest.raises(ConfigError, match="teacher"):
        TrainConfig(distill="soft")
    with pytest.raises(ConfigError, match="weight_dec"):
        TrainConfig.from_dict({"weight_decai": 0.1})


def test_recipes_are_field_overrides():
    plain = TrainConfig.from_recipe("plain", epochs=3)
    assert (plain.optimizer, plain.lr, plain.schedule, plain.augment, plain.recipe) == (
        "adam",
        1e-3,
        "constant",
        "none",
        "plain",
    )
    assert plain.epochs == 3 and plain.label_smoothing == 0.0
    assert TrainConfig.from_recipe("default") == TrainConfig()
    assert all(set(r) <= set(TrainConfig.__dataclass_fields__) for r in RECIPES.values())
    cfg = TrainConfig(augment=AugmentConfig(crop_padding=1), model_overrides={"depth": 1})
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_warmup_as_long_as_the_run_warns():
    with pytest.warns(UserWarning, match=r"warmup_epochs=3 >= epochs=2"):
        TrainConfig(epochs=2, warmup_epochs=3.0)
    with pytest.warns(UserWarning, match="warmup"):
        TrainConfig(epochs=3, warmup_epochs=3.0)


def test_distillation_loss_matches_its_definition():
    torch.manual_seed(1)
    student, teacher = torch.randn(5, 4), torch.randn(5, 4)
    assert distillation_loss(teacher, teacher).item() == pytest.approx(0, abs=1e-6)
    t = 2.0
    p = (teacher / t).softmax(1)
    kl = (p * (p.log() - (student / t).log_softmax(1))).sum(1).mean() * t * t
    assert distillation_loss(student, teacher, "soft", t).item() == pytest.approx(kl.item(), rel=1e-5)
    hard = torch.nn.functional.cross_entropy(student, teacher.argmax(1))
    assert distillation_loss(student, teacher, "hard").item() == pytest.approx(hard.item(), rel=1e-6)


@pytest.mark.slow
def test_train_learns_and_writes_run_folder(tmp_path, splits):
    out = tmp_path / "run"  # the CNN (with BatchNorm buffers) learns digits in a few steps, a ViT does not
    result = run(
        "classify",
        tiny_config(model="cnn-digits", model_overrides={}, epochs=3, lr=3e-3, augment="none", out_dir=str(out)),
        splits,
    )
    first, last = result.history[0], result.history[-1]
    assert len(result.history) == 3 and last["train_loss"] < first["train_loss"]
    assert result.best_val_acc > 0.5 and result.test["acc"] > 0.5  # 10 classes: chance is 0.1
    assert result.best_val_acc == max(r["val_acc"] for r in result.history)
    assert result.params == sum(p.numel() for p in result.model.parameters())
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
    csv_rows = (out / "metrics.csv").read_text().splitlines()
    assert csv_rows[0].startswith("epoch,train_acc,train_loss,lr") and len(csv_rows) == 4
    assert json.loads((out / "summary.json").read_text())["test"] == result.test
    assert json.loads((out / "run.json").read_text())["kind"] == "classify"
    assert TrainConfig.from_dict(json.loads((out / "config.json").read_text())) == result.config
    for name in ("last", "best"):
        assert result.checkpoints[name].is_file()
    state = RunDir(out).load_state()
    assert state["epoch"] == 3 and state["best_score"] == result.best_val_acc
    assert_same_weights(state["model"], weights(out / "last" / "model.safetensors"))  # state is self-consistent
    with pytest.raises(RunFolderError, match="--resume"):
        run("classify", tiny_config(out_dir=str(out)), splits)

    # best/ scored by `evaluate` (a separate code path) gives the trainer's test metrics
    report = evaluate_checkpoint(out, device="cpu", out_dir=tmp_path / "eval", temperature_scale=True)
    assert report["checkpoint"] == str(out / "best" / "model.safetensors")
    assert report["accuracy"] == result.test["acc"]
    assert report["nll"] == pytest.approx(result.test["loss"], rel=1e-4)
    assert report["ece"] == pytest.approx(result.test["ece"], abs=1e-6)
    assert report["n"] == len(splits.test) and sum(map(sum, report["confusion"])) == len(splits.test)
    assert report["temperature"] > 0 and "calibrated" in report
    for name in ("metrics.json", "reliability.png", "confusion.png"):
        assert (tmp_path / "eval" / name).stat().st_size > 0
    assert json.loads((tmp_path / "eval" / "run.json").read_text())["kind"] == "evaluate"


class KilledError(Exception):
    pass


class StopAfter(Reporter):
    """Raises after epoch ``stop``'s files are written, as a killed process would stop; keeps each
    epoch's ``last/`` files as they were then."""

    def __init__(self, stop: int, out) -> None:
        self.stop, self.out, self.saved = stop, out, {}

    def epoch(self, record):
        self.saved[record["epoch"]] = {
            n: (self.out / "last" / n).read_bytes() for n in ("state.pt", "model.safetensors")
        }
        if record["epoch"] == self.stop:
            raise KilledError


RANDOM = dict(
    epochs=4, augment="light", ema_decay=0.9, model_overrides={**TINY, "drop_rate": 0.1, "drop_path_rate": 0.2}
)


@pytest.mark.slow
def test_resume_ends_with_the_same_weights(tmp_path, splits):
    # randomness everywhere: shuffling, crop augmentation, dropout, stochastic depth, plus EMA state
    whole = run("classify", tiny_config(out_dir=str(tmp_path / "whole"), **RANDOM), splits)
    with pytest.raises(KilledError):
        run(
            "classify",
            tiny_config(out_dir=str(tmp_path / "cut"), **RANDOM),
            splits,
            reporter=StopAfter(2, tmp_path / "cut"),
        )
    assert RunDir(tmp_path / "cut").load_state()["epoch"] == 2
    with pytest.raises(RunFolderError, match=r"epochs \(run has 4, given 5\)"):
        run("classify", tiny_config(out_dir=str(tmp_path / "cut"), resume=True, **{**RANDOM, "epochs": 5}), splits)
    resumed = run("classify", tiny_config(out_dir=str(tmp_path / "cut"), resume=True, **RANDOM), splits)
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3, 4]
    for name in ("last", "best"):
        assert_same_weights(
            weights(tmp_path / "whole" / name / "model.safetensors"),
            weights(tmp_path / "cut" / name / "model.safetensors"),
        )
    assert resumed.history[-1]["val_acc"] == whole.history[-1]["val_acc"]
    assert resumed.test == whole.test


@pytest.mark.slow
def test_ema_weights_are_what_validation_and_checkpoints_use(tmp_path, splits):
    out = tmp_path / "ema"
    result = run("classify", tiny_config(out_dir=str(out), ema_decay=0.9, epochs=2), splits)
    state = RunDir(out).load_state()
    last = weights(out / "last" / "model.safetensors")
    assert_same_weights(last, state["ema"]["weights"])
    assert not torch.equal(last["head.weight"], state["model"]["head.weight"])  # the EMA lags the model
    assert load_checkpoint(out / "last").metadata["provenance"]["weights"] == "ema"
    best = load_checkpoint(out)
    assert_same_weights(best.model.state_dict(), result.model.state_dict())


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["weights-of-epoch-1", "state-of-epoch-1"])
def test_resume_after_a_kill_between_the_weights_and_the_state(tmp_path, splits, damage):
    config = dict(epochs=3, augment="light", model_overrides={**TINY, "drop_rate": 0.1})
    run("classify", tiny_config(out_dir=str(tmp_path / "whole"), **config), splits)
    cut = tmp_path / "cut"
    stop = StopAfter(2, cut)
    with pytest.raises(KilledError):
        run("classify", tiny_config(out_dir=str(cut), **config), splits, reporter=stop)
    # one of the two files of epoch 2 never reached the disk
    name = "model.safetensors" if damage == "weights-of-epoch-1" else "state.pt"
    (cut / "last" / name).write_bytes(stop.saved[1][name])
    resumed = run("classify", tiny_config(out_dir=str(cut), resume=True, **config), splits)
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3]
    assert [json.loads(x)["epoch"] for x in (cut / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3]
    for which in ("last", "best"):
        assert_same_weights(
            weights(tmp_path / "whole" / which / "model.safetensors"), weights(cut / which / "model.safetensors")
        )


def nan_from_epoch(epoch_index: int, monkeypatch) -> None:
    """Make the classification loss non-finite from epoch ``epoch_index`` (0-based) on."""
    step = ClassificationTask.step

    def diverging(self, net, batch, epoch):
        loss, sums, n = step(self, net, batch, epoch)
        return (loss * math.nan if epoch >= epoch_index else loss), sums, n

    monkeypatch.setattr(ClassificationTask, "step", diverging)


@pytest.mark.slow
def test_divergence_stops_and_keeps_the_last_finite_checkpoints(tmp_path, splits, monkeypatch):
    nan_from_epoch(1, monkeypatch)
    out = tmp_path / "run"
    with pytest.raises(DivergenceError, match=r"loss nan at epoch 2, batch 1 \(learning rate [0-9.e-]+\).*--lr"):
        run("classify", tiny_config(out_dir=str(out), epochs=3), splits)
    for which in ("best", "last"):
        loaded = load_checkpoint(out / which)
        assert loaded.metadata["provenance"]["epoch"] == 1
        assert all(torch.isfinite(v).all() for v in loaded.model.state_dict().values())
    assert RunDir(out).load_state()["epoch"] == 1
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 1
    RunDir(out).open("classify", {}, overwrite=True).close()  # the lock was released


@pytest.mark.slow
def test_distilled_student_from_a_teacher_checkpoint(tmp_path, splits):
    run(
        "classify",
        tiny_config(model="cnn-digits", model_overrides={}, augment="none", out_dir=str(tmp_path / "teacher")),
        splits,
    )
    result = run(
        "classify", tiny_config(teacher=str(tmp_path / "teacher"), distill="hard", out_dir=str(tmp_path / "s")), splits
    )
    loaded = load_checkpoint(tmp_path / "s")
    assert loaded.kind == "distilled-classifier" and loaded.model.config.distill_token
    images = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        assert torch.equal(loaded.model(images), result.model(images))


@pytest.mark.slow
def test_cli_train_resume_and_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    args = [
        "train",
        "--rows",
        "128",
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "--set",
        "depth=1",
        "--set",
        "embed_dim=32",
        "--recipe",
        "plain",
        "--device",
        "cpu",
        "--out",
        str(out),
        "--quiet",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "epoch 1/1" in printed and "test acc" in printed
    saved = json.loads((out / "config.json").read_text())
    assert saved["recipe"] == "plain" and saved["model_overrides"] == {"depth": 1, "embed_dim": 32}
    assert main(["train", "--out", str(out), "--resume", "--epochs", "3"]) == 2  # epochs differ
    err = capsys.readouterr().err
    assert "epochs (run has 1, given 3)" in err and len(err.strip().splitlines()) == 1
    assert main(["evaluate", str(out), "--split", "val", "--out", str(tmp_path / "ev")]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["split"] == "val"
