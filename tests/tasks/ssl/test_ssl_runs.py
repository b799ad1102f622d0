"""Pretraining runs on the engine (tiny): MAE and DINO write run folders whose encoder checkpoint
loads and fine-tunes, DINO resumes exactly, bad settings are refused; then fine-tuning with layer
decay, distillation from a CNN checkpoint, and the frozen-feature probes."""

import json
from dataclasses import replace

import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import load_dataset, normalize
from vitlab.engine import Reporter, layer_decay_groups
from vitlab.errors import ConfigError
from vitlab.models import build_registered
from vitlab.runs import RunDir, load_checkpoint, load_matching_weights
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig
from vitlab.tasks.ssl import PretrainConfig, probe_checkpoint

TINY = {"depth": 2, "embed_dim": 32, "num_heads": 2}
SMALL = dict(model_overrides=TINY, batch_size=32, warmup_epochs=0.5, device="cpu")
SMALL_FLAGS = [
    "--rows",
    "120",
    "--batch-size",
    "32",
    "--device",
    "cpu",
    "--set",
    "depth=1",
    "--set",
    "embed_dim=32",
    "--set",
    "num_heads=2",
    "--set",
    "warmup_epochs=0",
    "--quiet",
]


@pytest.fixture(scope="module")
def splits():
    return load_dataset("digits", seed=0, rows=120)


@pytest.fixture(scope="module")
def mae_run(tmp_path_factory, splits):
    out = tmp_path_factory.mktemp("mae") / "run"
    return out, run("pretrain", PretrainConfig(method="mae", epochs=1, out_dir=str(out), **SMALL), splits)


def features(model, splits):
    x = normalize(splits.val.images[:6], torch.tensor(splits.mean), torch.tensor(splits.std))
    return model.forward_head(model.forward_features(x), pre_logits=True)


@pytest.mark.slow
def test_mae_run_folder_holds_an_encoder_checkpoint_and_its_figures(mae_run, splits):
    out, result = mae_run
    assert {"run.json", "config.json", "metrics.jsonl", "summary.json", "loss.png", "reconstructions.png", "last"} <= {
        p.name for p in out.iterdir()
    }
    assert result.checkpoint == out / "last" / "model.safetensors"
    loaded = load_checkpoint(out)
    assert loaded.kind == "encoder" and loaded.name == "vit-digits" and loaded.model.config.num_classes == 0
    assert loaded.data.dataset == "digits" and loaded.data.image_size == (8, 8)
    torch.testing.assert_close(features(loaded.model, splits), features(result.model, splits), rtol=0, atol=0)
    torch.manual_seed(0)
    untrained = build_registered("vit-digits", **TINY, num_classes=0)
    assert not torch.allclose(untrained.patch_embed.proj.weight, result.model.patch_embed.proj.weight)
    config = json.loads((out / "config.json").read_text())
    assert config["method"] == "mae" and config["mae"]["mask_ratio"] == 0.75
    assert PretrainConfig.from_dict(config) == result.config  # config.json makes the run again


@pytest.mark.slow
def test_fine_tuning_starts_from_the_pretrained_encoder(mae_run, splits):
    out, result = mae_run
    model = build_registered("vit-digits", **TINY)
    assert load_matching_weights(model, out) == ["head.bias", "head.weight"]  # only the new head is left as built
    encoder = result.model.state_dict()
    assert all(torch.equal(v, encoder[k]) for k, v in model.state_dict().items() if k in encoder)
    # at a vanishing learning rate, fine-tuning keeps the pretrained weights: it started from them
    tuned = run(
        "classify",
        TrainConfig(
            model_overrides=TINY,
            epochs=1,
            lr=1e-9,
            min_lr=0.0,
            warmup_epochs=0.0,
            device="cpu",
            init=str(out),
            layer_decay=0.5,
            augment="none",
        ),
        splits,
    ).model.state_dict()
    for k, v in encoder.items():
        torch.testing.assert_close(tuned[k], v, rtol=0, atol=1e-6, msg=k)


class InterruptError(Exception):
    pass


class StopAfter(Reporter):
    """Stops a run once epoch ``epoch`` is written, as Ctrl-C would."""

    def __init__(self, epoch: int) -> None:
        self.stop = epoch

    def epoch(self, record: dict) -> None:
        if record["epoch"] == self.stop:
            raise InterruptError


@pytest.mark.slow
def test_dino_run_resumed_after_an_interruption_ends_as_an_uninterrupted_one(tmp_path, splits):
    config = PretrainConfig(method="dino", epochs=3, local_crops=1, dino_out_dim=16, **SMALL)
    whole = run("pretrain", replace(config, out_dir=str(tmp_path / "whole")), splits)
    with pytest.raises(InterruptError):
        run("pretrain", replace(config, out_dir=str(tmp_path / "cut")), splits, reporter=StopAfter(2))
    assert len(RunDir(tmp_path / "cut").load_state()["history"]) == 2
    resumed = run("pretrain", replace(config, out_dir=str(tmp_path / "cut"), resume=True), splits)
    for k, v in whole.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[k], v), k
    state = {w: RunDir(tmp_path / w).load_state() for w in ("whole", "cut")}
    for part in ("teacher", "centre"):
        for k, v in state["whole"]["task"][part].items():
            assert torch.equal(state["cut"]["task"][part][k], v), (part, k)
    clock = ("seconds", "images_per_s", "data_wait")
    assert [{k: v for k, v in r.items() if k not in clock} for r in resumed.history] == [
        {k: v for k, v in r.items() if k not in clock} for r in whole.history
    ]
    assert all(0 <= r["train_teacher_entropy"] <= torch.log(torch.tensor(16.0)).item() + 1e-4 for r in whole.history)
    loaded = load_checkpoint(tmp_path / "cut")
    assert loaded.kind == "encoder"
    torch.testing.assert_close(features(loaded.model, splits), features(whole.model, splits), rtol=0, atol=0)


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"local_crops": -1}, "local_crops must be"),
        ({"mae": {"mask_ratio": 0.0}}, "mask_ratio must be"),
        ({"mae": {"mask_ratio": 1.0}}, "mask_ratio must be"),
        ({"mae": {"ratio": 0.5}}, "unknown MAEConfig option"),
        ({"method": "byol"}, "method must be"),
        ({"images": "val"}, "images must be"),
        ({"teacher_temp": 0.0}, "teacher_temp must be"),
        ({"teacher_momentum": 1.5}, "teacher_momentum must be"),
        ({"dino_out_dim": 0}, "dino_out_dim must be"),
        ({"epochs": 0}, "epochs must be"),
        ({"method": "dino", "ema_decay": 0.99}, "already a moving average"),
    ],
)
def test_bad_pretraining_settings_are_refused(fields, message):
    with pytest.raises(ConfigError, match=message):
        PretrainConfig(**fields)


def test_pretraining_needs_a_vit(splits):
    with pytest.raises(ConfigError, match="not a ViT"):
        run("pretrain", PretrainConfig(model="cnn-digits", epochs=1, warmup_epochs=0.0, device="cpu"), splits)


def test_cli_refuses_bad_values_and_a_folder_holding_another_run(tmp_path, capsys):
    assert main(["pretrain", "mae", "--mask-ratio", "0", "--epochs", "1"]) == 2
    assert "mask_ratio must be a number in (0, 1)" in capsys.readouterr().err
    assert main(["pretrain", "dino", "--local-crops", "-1"]) == 2
    assert main(["pretrain", "mae", "--set", "mae.ratio=0.5"]) == 2
    finished = tmp_path / "t1"
    with RunDir(finished).open("classify", {"model": "vit-digits"}):
        pass
    before = (finished / "config.json").read_bytes()
    assert main(["pretrain", "mae", "--epochs", "1", "--out", str(finished), *SMALL_FLAGS]) == 2
    assert "already holds a classify run" in capsys.readouterr().err
    assert (finished / "config.json").read_bytes() == before


@pytest.mark.slow
def test_cli_set_reaches_every_field_and_resume_continues(tmp_path, capsys):
    out = str(tmp_path / "dino")
    assert (
        main(
            [
                "pretrain",
                "dino",
                "--epochs",
                "1",
                "--out",
                out,
                "--local-crops",
                "1",
                "--set",
                "teacher_momentum=0.99",
                "--set",
                "dino_out_dim=16",
                "--set",
                "mae.decoder_depth=1",
                *SMALL_FLAGS,
            ]
        )
        == 0
    )
    assert "dino pretraining of vit-digits on digits: 1 epochs" in capsys.readouterr().out
    config = json.loads((tmp_path / "dino" / "config.json").read_text())
    assert (config["teacher_momentum"], config["dino_out_dim"], config["local_crops"], config["rows"]) == (
        0.99,
        16,
        1,
        120,
    )
    assert config["mae"]["decoder_depth"] == 1 and config["model_overrides"] == TINY | {"depth": 1}
    assert main(["pretrain", "dino", "--epochs", "1", "--out", out, *SMALL_FLAGS]) == 2  # holds a run already
    assert main(["pretrain", "dino", "--out", out, "--resume", "--epochs", "2", "--quiet"]) == 2
    assert "epochs (run has 1, given 2)" in capsys.readouterr().err
    assert main(["pretrain", "dino", "--out", out, "--resume", "--device", "cpu", "--quiet"]) == 0
    assert main(["pretrain", "mae", "--epochs", "1", "--out", out, "--overwrite", *SMALL_FLAGS]) == 0
    assert load_checkpoint(out).kind == "encoder"
    assert json.loads((tmp_path / "dino" / "run.json").read_text())["kind"] == "mae"


def test_layer_decay_groups_scale_by_depth():
    model = build_registered("vit-digits", **TINY)
    groups = layer_decay_groups(model, 0.05, 0.5)
    scale = {id(p): g["lr_scale"] for g in groups for p in g["params"]}
    assert scale[id(model.patch_embed.proj.weight)] == 0.5**3
    assert scale[id(next(model.blocks[0].parameters()))] == 0.5**2
    assert scale[id(next(model.blocks[1].parameters()))] == 0.5
    assert scale[id(model.head.weight)] == 1.0
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    with pytest.raises(ValueError, match="layer decay"):
        layer_decay_groups(model, 0.05, 0.0)


@pytest.mark.slow
def test_distillation_from_a_cnn_checkpoint_and_reloading_the_student(tmp_path, splits):
    teacher = run(
        "classify",
        TrainConfig(
            model="cnn-digits",
            model_overrides={"widths": (8, 8, 8)},
            epochs=1,
            warmup_epochs=0.0,
            device="cpu",
            out_dir=str(tmp_path / "cnn"),
        ),
        splits,
    )
    assert teacher.checkpoints
    student = run(
        "classify",
        TrainConfig(
            model_overrides=TINY,
            epochs=1,
            warmup_epochs=0.0,
            device="cpu",
            teacher=str(tmp_path / "cnn"),
            distill="soft",
            distill_temperature=2.0,
            out_dir=str(tmp_path / "deit"),
        ),
        splits,
    )
    assert student.model.config.distill_token and student.model.dist_token is not None
    reloaded = load_checkpoint(tmp_path / "deit").model
    assert reloaded.config.distill_token and reloaded.dist_token is not None
    images = splits.val.images[:4]
    torch.testing.assert_close(reloaded(images), student.model.eval()(images))
    with pytest.raises(ValueError, match="--teacher"):
        TrainConfig(distill="soft")


@pytest.mark.slow
def test_probes_and_cli(mae_run, capsys):
    out, _ = mae_run
    linear = probe_checkpoint(out, "linear", rows=200, device="cpu")
    knn = probe_checkpoint(out, "knn", rows=200, k=5, device="cpu")
    assert 0.0 <= linear["accuracy"] <= 1.0 and knn["k"] == 5 and linear["train_rows"] == 200
    assert main(["evaluate", str(out), "--knn", "--k", "3", "--rows", "100", "--device", "cpu"]) == 0
    assert "3-NN" in capsys.readouterr().out
