"""End-to-end: pretrain -> fine-tune with layer decay, distil from a CNN checkpoint, probes (tiny runs)."""
import json

import pytest
import torch

from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.models import create_model
from vitlab.ssl import PretrainConfig, layer_decay_groups, load_pretrained, pretrain, probe_checkpoint
from vitlab.ssl.distill import DistilledVisionTransformer
from vitlab.train import TrainConfig, load_checkpoint, train

TINY = {"depth": 2, "embed_dim": 32, "num_heads": 2}



@pytest.fixture(scope="module")
def splits():
    return load_dataset("digits", seed=0, rows=120)


@pytest.fixture(scope="module")
def mae_ckpt(tmp_path_factory, splits):
    out = tmp_path_factory.mktemp("mae")
    result = pretrain(PretrainConfig(method="mae", model_overrides=TINY, epochs=1, batch_size=64, device="cpu",
                                     out_dir=str(out)), splits)
    assert (out / "reconstructions.png").is_file() and (out / "loss.png").is_file()
    assert result.history[0]["loss"] > 0
    return out


def test_dino_pretraining_logs_collapse_monitors(splits):
    result = pretrain(PretrainConfig(method="dino", model_overrides=TINY, epochs=1, batch_size=64, local_crops=1,
                                     dino_out_dim=16, device="cpu"), splits)
    record = result.history[0]
    assert {"loss", "teacher_entropy", "teacher_student_kl"} <= set(record)
    assert 0 <= record["teacher_entropy"] <= torch.log(torch.tensor(16.0)).item() + 1e-4


def test_init_loads_pretrained_encoder_then_fine_tunes_with_layer_decay(mae_ckpt, splits):
    encoder = load_checkpoint(mae_ckpt).model
    model = create_model("vit-digits", **TINY)
    assert load_pretrained(model, mae_ckpt) == []
    torch.testing.assert_close(model.state_dict(), encoder.state_dict())
    with pytest.raises(ValueError, match="no weight"):
        load_pretrained(create_model("cnn-digits", widths=(8, 8, 8)), mae_ckpt)
    result = train(TrainConfig(model_overrides=TINY, epochs=1, device="cpu", init=str(mae_ckpt), layer_decay=0.5,
                               augment="none"), splits)
    assert result.history[0]["train_loss"] > 0


def test_layer_decay_groups_scale_by_depth():
    model = create_model("vit-digits", **TINY)
    groups = layer_decay_groups(model, 0.05, 0.5)
    scale = {id(p): g["lr_scale"] for g in groups for p in g["params"]}
    assert scale[id(model.patch_embed.proj.weight)] == 0.5 ** 3
    assert scale[id(next(model.blocks[0].parameters()))] == 0.5 ** 2
    assert scale[id(next(model.blocks[1].parameters()))] == 0.5
    assert scale[id(model.head.weight)] == 1.0
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    with pytest.raises(ValueError, match="layer decay"):
        layer_decay_groups(model, 0.05, 0.0)


def test_distillation_from_a_cnn_checkpoint_and_reloading_the_student(tmp_path, splits):
    teacher = train(TrainConfig(model="cnn-digits", model_overrides={"widths": (8, 8, 8)}, epochs=1, device="cpu",
                                out_dir=str(tmp_path / "cnn")), splits)
    assert teacher.checkpoints
    student = train(TrainConfig(model_overrides=TINY, epochs=1, device="cpu", teacher=str(tmp_path / "cnn"),
                                distill="soft", distill_temperature=2.0, out_dir=str(tmp_path / "deit")), splits)
    assert isinstance(student.model, DistilledVisionTransformer)
    reloaded = load_checkpoint(tmp_path / "deit").model
    assert isinstance(reloaded, DistilledVisionTransformer)
    images = splits.val.images[:4]
    torch.testing.assert_close(reloaded(images), student.model.eval()(images))
    with pytest.raises(ValueError, match="--teacher"):
        TrainConfig(distill="soft")


def test_probes_and_cli(mae_ckpt, capsys):
    linear = probe_checkpoint(mae_ckpt, "linear", rows=200, device="cpu")
    knn = probe_checkpoint(mae_ckpt, "knn", rows=200, k=5, device="cpu")
    assert 0.0 <= linear["accuracy"] <= 1.0 and knn["k"] == 5 and linear["train_rows"] == 200
    assert main(["evaluate", str(mae_ckpt), "--knn", "--k", "3", "--rows", "100", "--device", "cpu"]) == 0
    assert "3-NN" in capsys.readouterr().out
    meta = json.loads((mae_ckpt / "config.json").read_text())
    assert meta["method"] == "mae" and meta["mae"]["mask_ratio"] == 0.75
