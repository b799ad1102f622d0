"""``vitlab export``: a checkpoint to ONNX, timm and Hugging Face from the command line, each checked in its
own runtime against vitlab's forward."""

import json

import numpy as np
import pytest
import torch

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    model = build_registered("vit-seed", pool="token", class_token=True, fc_norm=None)
    data = DataConfig((28, 28), 1, (0.29,), (0.35,), [f"c{i}" for i in range(10)], dataset="fashion-mnist")
    return save_checkpoint(model, folder / "model.safetensors", "classifier", data, name="vit-seed")


def logits_of(path, images):
    with torch.no_grad():
        return load_checkpoint(path).model(images)


@pytest.mark.slow
def test_export_onnx_runs_in_onnxruntime(checkpoint, tmp_path, capsys):
    ort = pytest.importorskip("onnxruntime", reason="pip install 'vitlab[export]'")
    pytest.importorskip("onnxscript", reason="pip install 'vitlab[export]'")
    out = tmp_path / "model.onnx"
    assert main(["export", str(checkpoint), "--to", "onnx", "--out", str(out)]) == 0
    images = torch.rand(3, 1, 28, 28)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: images.numpy()})
    np.testing.assert_allclose(got, logits_of(checkpoint, images).numpy(), atol=1e-4)
    assert main(["export", str(checkpoint), "--to", "onnx", "--out", str(out)]) == 2  # kept unless --overwrite
    assert "--overwrite" in capsys.readouterr().err


@pytest.mark.slow
def test_export_hf_loads_in_transformers(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("timm")
    model = build_registered("vit-seed", pool="token", class_token=True, fc_norm=None, in_chans=3)
    data = DataConfig((28, 28), 3, (0.29,) * 3, (0.35,) * 3, [f"c{i}" for i in range(10)], dataset="cifar10")
    checkpoint = save_checkpoint(model, tmp_path / "model.safetensors", "classifier", data, name="vit-seed")
    out = tmp_path / "hf"
    assert main(["export", str(checkpoint), "--to", "hf", "--out", str(out)]) == 0
    model = transformers.ViTForImageClassification.from_pretrained(out).eval()
    images = torch.rand(2, 3, 28, 28)
    with torch.no_grad():
        got = model(pixel_values=images).logits
    torch.testing.assert_close(got, logits_of(checkpoint, images), atol=1e-5, rtol=0)
    assert json.loads((out / "config.json").read_text())["id2label"]["3"] == "c3"
    processor = transformers.AutoImageProcessor.from_pretrained(out)
    assert processor.data_config["mean"] == pytest.approx((0.29,) * 3)  # the model's own, not ImageNet's


@pytest.mark.slow
def test_export_hf_refuses_a_greyscale_model_in_one_line(checkpoint, tmp_path, capsys):
    capsys.readouterr()
    assert main(["export", str(checkpoint), "--to", "hf", "--out", str(tmp_path / "hf")]) == 2
    refusal = capsys.readouterr().err.strip()
    assert len(refusal.splitlines()) == 1 and "1-channel" in refusal and "--to onnx" in refusal
    assert not (tmp_path / "hf").exists()


@pytest.mark.slow
def test_export_timm_writes_weights_and_its_pretrained_cfg(checkpoint, tmp_path):
    timm = pytest.importorskip("timm")
    out = tmp_path / "timm"
    assert main(["export", str(checkpoint), "--to", "timm", "--out", str(out)]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["pretrained_cfg"]["input_size"] == [1, 28, 28]
    assert config["pretrained_cfg"]["mean"] == [0.29] and config["pretrained_cfg"]["std"] == [0.35]
    model = timm.create_model("local-dir:" + str(out), pretrained=True).eval()
    images = torch.rand(2, 1, 28, 28)
    with torch.no_grad():
        got = model(images)
    torch.testing.assert_close(got, logits_of(checkpoint, images), atol=1e-5, rtol=0)


def test_export_refuses_what_hf_cannot_express(tmp_path, capsys):
    model = build_registered("vit-seed")  # mean pooling: Hugging Face's ViT reads the class token only
    path = save_checkpoint(model, tmp_path / "m.safetensors", "classifier", DataConfig((28, 28), 1, (0.0,), (1.0,)))
    assert main(["export", str(path), "--to", "hf", "--out", str(tmp_path / "hf")]) == 2
    assert "pool" in capsys.readouterr().err
