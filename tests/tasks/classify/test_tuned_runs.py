"""Tuned runs from the command line: a timm id from a local hub cache trained with --tune lora on a folder of
photos, then evaluated, asked to predict, exported merged (ONNX, timm) and as adapters; a LoRA run that
resumes exactly; prompt tuning refused for timm in one line; bad settings refused in one line."""

import json

import pytest
import torch
from test_photo_roundtrip import CLASSES, TIMM_ID, timm_id  # noqa: F401  (the fixture)

from vitlab import load_checkpoint
from vitlab.cli.main import main
from vitlab.data import load_dataset
from vitlab.engine import Reporter
from vitlab.errors import CheckpointError
from vitlab.models import build_registered
from vitlab.models.tuning import TuneOptions, load_adapters, read_adapters
from vitlab.runs import RunDir
from vitlab.tasks import run
from vitlab.tasks.classify import TrainConfig


def digits_run(tmp_path, name, *extra):
    out = tmp_path / name
    argv = ["train", "--epochs", "2", "--rows", "200", "--batch-size", "32", "--device", "cpu", "--out", str(out)]
    return out, main([*argv, *extra])


@pytest.mark.slow
def test_a_timm_id_trains_with_lora_and_every_command_takes_the_run(timm_id, hue_photos, tmp_path, capsys):  # noqa: F811
    photos = tmp_path / "photos"
    hue_photos(photos / "train", 6, seed=1)
    hue_photos(photos / "val", 3, seed=2)
    run = tmp_path / "lora"
    argv = ["train", "--init", TIMM_ID, "--tune", "lora", "--dataset", "folder", "--data-dir", str(photos)]
    argv += ["--epochs", "1", "--batch-size", "6", "--device", "cpu", "--out", str(run)]
    assert main([*argv, "--set", "tune.rank=4", "--set", "tune.targets=qkv,fc2", "--set", "data.workers=1"]) == 0
    err = capsys.readouterr().err
    assert "parameters" in err and "the rest frozen" in err
    summary = json.loads((run / "summary.json").read_text())
    cost = summary["cost"]
    assert 0 < cost["trainable_params"] < cost["total_params"] and cost["optimizer_state_bytes"] > 0
    config = json.loads((run / "config.json").read_text())
    assert config["tune"] == "lora" and config["tune_options"]["targets"] == ["q", "k", "v", "fc2"]

    tuned = load_checkpoint(run)  # merged: a plain ViT
    assert not any("lora" in k for k in tuned.model.state_dict())
    assert main(["evaluate", str(run), "--split", "val", "--device", "cpu"]) == 0
    image = photos / "val" / "bee" / "000.jpg"
    capsys.readouterr()
    assert main(["predict", str(run), str(image), "--json", "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["top"]

    pytest.importorskip("timm")
    assert main(["export", str(run), "--to", "timm", "--out", str(tmp_path / "timm")]) == 0
    import timm

    exported = timm.create_model(f"local-dir:{tmp_path / 'timm'}", pretrained=True).eval()
    images = torch.randn(2, 3, 224, 224)
    with torch.no_grad():
        assert (exported(images) - tuned.model.eval()(images)).abs().max() <= 1e-4

    adapters = tmp_path / "adapters.safetensors"
    assert main(["export", str(run), "--adapters-only", "--out", str(adapters)]) == 0
    tensors, metadata = read_adapters(adapters)
    assert metadata["base"] == TIMM_ID and len(metadata["base_sha256"]) == 64
    assert {k.split(".")[-1] for k in tensors if "lora" in k} == {"q", "k", "v", "fc2"}


class KilledError(Exception):
    pass


class StopAfter(Reporter):
    """Raises after epoch ``stop``'s files are written, as a killed process would stop."""

    def __init__(self, stop: int) -> None:
        self.stop = stop

    def epoch(self, record):
        if record["epoch"] == self.stop:
            raise KilledError


@pytest.mark.slow
def test_a_lora_run_resumes_exactly_and_its_adapters_load_onto_its_base_only(tmp_path):
    splits = load_dataset("digits", rows=200, seed=0)

    def config(out, **extra):
        return TrainConfig(
            epochs=3,
            warmup_epochs=1.0,
            batch_size=32,
            device="cpu",
            tune="lora",
            tune_options=TuneOptions(rank=4, dropout=0.1),
            model_overrides={"drop_path_rate": 0.1},
            out_dir=str(tmp_path / out),
            **extra,
        )

    run("classify", config("whole"), splits)
    with pytest.raises(KilledError):
        run("classify", config("cut"), splits, reporter=StopAfter(2))
    assert RunDir(tmp_path / "cut").load_state()["epoch"] == 2
    run("classify", config("cut", resume=True), splits)
    for name in ("last", "best"):
        a, b = (load_checkpoint(tmp_path / out / name).model.state_dict() for out in ("whole", "cut"))
        assert all(torch.equal(a[k], b[k]) for k in a)

    adapters = tmp_path / "a.safetensors"
    assert main(["export", str(tmp_path / "whole"), "--adapters-only", "--out", str(adapters)]) == 0
    torch.manual_seed(0)  # the run's seed: the same initial base weights
    base = build_registered("vit-digits", num_classes=10, in_chans=1, img_size=(8, 8), drop_path_rate=0.1)
    load_adapters(base, adapters)
    images = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        best = load_checkpoint(tmp_path / "whole").model.eval()
        assert (base.eval()(images) - best(images)).abs().max() <= 1e-5
    torch.manual_seed(1)
    other = build_registered("vit-digits", num_classes=10, in_chans=1, img_size=(8, 8))
    with pytest.raises(CheckpointError, match="another base model"):
        load_adapters(other, adapters)


@pytest.mark.slow
def test_prompt_tuning_exports_to_onnx_only(tmp_path, capsys):
    run, rc = digits_run(tmp_path, "prompt", "--tune", "prompt", "--set", "tune.prompts=4", "--set", "tune.deep=true")
    assert rc == 0
    assert load_checkpoint(run).model.config.prompt_tokens == 4
    capsys.readouterr()
    assert main(["export", str(run), "--to", "timm", "--out", str(tmp_path / "timm")]) == 2
    err = capsys.readouterr().err.strip()
    assert "prompt-tuned" in err and "--to onnx" in err and len(err.splitlines()) == 1
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    onnx_file = tmp_path / "prompt.onnx"
    assert main(["export", str(run), "--to", "onnx", "--out", str(onnx_file)]) == 0
    model = load_checkpoint(run).model.eval()
    images = torch.randn(2, 1, 8, 8)
    session = ort.InferenceSession(str(onnx_file), providers=["CPUExecutionProvider"])
    logits = session.run(None, {session.get_inputs()[0].name: images.numpy()})[0]
    with torch.no_grad():
        assert abs(logits - model(images).numpy()).max() <= 1e-4


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tune", "lora", "--set", "tune.rank=0"], "tune.rank"),
        (["--tune", "lora", "--set", "tune.targets=qkv,out"], "unknown LoRA target 'out'"),
        (["--tune", "last-9"], "more blocks than the model's 4"),
        (["--tune", "lora", "--model", "cnn-digits"], "SimpleCNN is not one"),
        (["--tune", "frozen"], "tune must be one of"),
    ],
)
def test_bad_tune_settings_get_one_line(tmp_path, capsys, argv, message):
    assert main(["train", "--epochs", "1", "--rows", "50", "--set", "warmup_epochs=0", "--device", "cpu", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
