import json

import pytest
import torch
from safetensors.torch import load_file

from vitlab.cli.main import main
from vitlab.data import AugmentConfig, load_dataset
from vitlab.train import RECIPES, Reporter, TrainConfig, evaluate_checkpoint, train
from vitlab.train.checkpoint import load_state

TINY = {"depth": 1, "embed_dim": 32, "num_heads": 2}


@pytest.fixture(scope="module")
def splits():
    return load_dataset("digits", rows=192)


def tiny_config(**overrides) -> TrainConfig:
    base = dict(model_overrides=TINY, rows=192, epochs=2, batch_size=32, warmup_epochs=1.0, device="cpu")
    return TrainConfig(**{**base, **overrides})


def test_config_validation_names_the_way_out():
    with pytest.raises(ValueError, match="adamw"):
        TrainConfig(optimizer="lbfgs")
    with pytest.raises(ValueError, match="plain"):
        TrainConfig.from_recipe("fast")
    with pytest.raises(ValueError, match="out_dir"):
        TrainConfig(resume=True)
    with pytest.raises(ValueError, match="light"):
        TrainConfig(augment="heavy")


def test_recipes_are_field_overrides():
    plain = TrainConfig.from_recipe("plain", epochs=3)
    assert (plain.optimizer, plain.lr, plain.schedule, plain.augment, plain.recipe) == \
        ("adam", 1e-3, "constant", "none", "plain")
    assert plain.epochs == 3 and plain.label_smoothing == 0.0
    assert TrainConfig.from_recipe("default") == TrainConfig()
    assert all(set(r) <= set(TrainConfig.__dataclass_fields__) for r in RECIPES.values())
    cfg = TrainConfig(augment=AugmentConfig(crop_padding=1), model_overrides={"depth": 1})
    assert TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_train_learns_and_writes_run_folder(tmp_path, splits):
    out = tmp_path / "run"   # the CNN (with BatchNorm buffers) learns digits in a few steps, a ViT does not
    result = train(tiny_config(model="cnn-digits", model_overrides={}, epochs=3, lr=3e-3, augment="none",
                               out_dir=str(out)), splits)
    first, last = result.history[0], result.history[-1]
    assert len(result.history) == 3 and last["train_loss"] < first["train_loss"]
    assert result.best_val_acc > 0.5 and result.test["acc"] > 0.5        # 10 classes: chance is 0.1
    assert result.params == sum(p.numel() for p in result.model.parameters())
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2, 3]
    csv_rows = (out / "metrics.csv").read_text().splitlines()
    assert csv_rows[0].startswith("epoch,train_loss,train_acc,val_loss,val_acc,val_ece") and len(csv_rows) == 4
    assert json.loads((out / "summary.json").read_text())["test"] == result.test
    for name in ("last", "best"):
        assert result.checkpoints[name].is_file()
    state = load_state(out / "last" / "state.pt")
    assert state["epoch"] == 3 and state["best_val_acc"] == result.best_val_acc
    with pytest.raises(ValueError, match="--resume"):
        train(tiny_config(out_dir=str(out)), splits)

    # the final weights scored by `evaluate` (a separate code path) agree with the trainer's test metrics
    report = evaluate_checkpoint(out / "last", device="cpu", out_dir=tmp_path / "eval", temperature_scale=True)
    assert report["accuracy"] == pytest.approx(result.test["acc"])
    assert report["nll"] == pytest.approx(result.test["loss"], rel=1e-4)
    assert report["ece"] == pytest.approx(result.test["ece"], abs=1e-6)
    assert report["n"] == len(splits.test) and sum(map(sum, report["confusion"])) == len(splits.test)
    assert report["temperature"] > 0 and "calibrated" in report
    for name in ("metrics.json", "reliability.png", "confusion.png"):
        assert (tmp_path / "eval" / name).stat().st_size > 0


class Interrupt(Exception):
    pass


class StopAfter(Reporter):
    """Raises after an epoch's checkpoint is written, as a killed process would stop."""

    def __init__(self, epochs: int) -> None:
        self.stop = epochs

    def epoch(self, record):
        if record["epoch"] == self.stop:
            raise Interrupt


def test_resume_ends_with_the_same_weights(tmp_path, splits):
    # randomness everywhere: shuffling, crop augmentation, dropout, stochastic depth, plus EMA state
    config = dict(epochs=4, augment="light", ema_decay=0.9,
                  model_overrides={**TINY, "drop_rate": 0.1, "drop_path_rate": 0.2})
    whole = train(tiny_config(out_dir=str(tmp_path / "whole"), **config), splits)
    with pytest.raises(Interrupt):
        train(tiny_config(out_dir=str(tmp_path / "cut"), **config), splits, reporter=StopAfter(2))
    assert load_state(tmp_path / "cut" / "last" / "state.pt")["epoch"] == 2
    with pytest.raises(ValueError, match="epochs"):
        train(tiny_config(out_dir=str(tmp_path / "cut"), resume=True, **{**config, "epochs": 5}), splits)
    resumed = train(tiny_config(out_dir=str(tmp_path / "cut"), resume=True, **config), splits)
    assert [r["epoch"] for r in resumed.history] == [1, 2, 3, 4]
    for name in ("last", "best"):
        a = load_file(tmp_path / "whole" / name / "model.safetensors")
        b = load_file(tmp_path / "cut" / name / "model.safetensors")
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert resumed.history[-1]["val_acc"] == whole.history[-1]["val_acc"]
    assert resumed.test == whole.test


def test_cli_train_resume_and_evaluate(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "--rows", "128", "--epochs", "1", "--batch-size", "64", "--set", "depth=1",
            "--set", "embed_dim=32", "--recipe", "plain", "--device", "cpu", "--out", str(out), "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "epoch 1/1" in printed and "test acc" in printed
    saved = json.loads((out / "config.json").read_text())
    assert saved["recipe"] == "plain" and saved["model_overrides"] == {"depth": 1, "embed_dim": 32}
    assert main(["train", "--out", str(out), "--resume", "--epochs", "3"]) == 2       # epochs differ
    assert "epochs (run has 1, given 3)" in capsys.readouterr().err
    assert main(["evaluate", str(out), "--split", "val", "--out", str(tmp_path / "ev")]) == 0
    assert "accuracy" in capsys.readouterr().out
    assert json.loads((tmp_path / "ev" / "metrics.json").read_text())["split"] == "val"
