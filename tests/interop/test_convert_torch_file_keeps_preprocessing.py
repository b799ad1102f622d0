"""``vitlab convert --to timm X.pth`` (a torch file, which has no metadata) writes timm's ``config.json`` beside it
carrying the model's own input size, mean and std: reading the file back (``convert``, ``predict``) takes them from
there, never ImageNet's; timm itself (the oracle) builds the same model and resolves the same preprocessing from it.
A ``config.json`` already there that is not this model's is refused in one line, unless ``--overwrite``."""

import json

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, load_checkpoint, save_checkpoint

timm = pytest.importorskip("timm")
from timm.data import resolve_data_config  # noqa: E402

DIGITS = ((0.301,), (0.3757,))  # statistics a 1-channel run records


def cases() -> list[tuple[int, int, tuple[float, ...], tuple[float, ...]]]:
    """(channels, side, mean, std): 1-channel with 0.5/0.25 and the digits' statistics, and drawn ones."""
    rng = np.random.default_rng(5)
    out = [(1, 8, (0.5,), (0.25,)), (1, 8, *DIGITS)]
    for _ in range(4):
        chans = int(rng.choice([1, 3]))
        mean = tuple(float(v) for v in rng.uniform(0.05, 0.95, chans))
        std = tuple(float(v) for v in rng.uniform(0.05, 0.6, chans))
        out.append((chans, int(rng.choice([8, 16])), mean, std))
    return out


def source_model(tmp_path, chans, side, mean, std, seed=0, name="model"):
    torch.manual_seed(seed)
    model = build_registered(
        "vit-digits", in_chans=chans, img_size=side, depth=1, embed_dim=16, num_heads=2, num_classes=3
    ).eval()
    data = DataConfig((side, side), chans, mean, std, ["ant", "bee", "cat"], dataset="digits")
    return model, save_checkpoint(model, tmp_path / f"{name}.safetensors", "classifier", data, name="vit-digits")


def one_error(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


@pytest.mark.parametrize("chans, side, mean, std", cases())
def test_a_torch_file_and_back_keeps_the_models_own_preprocessing(chans, side, mean, std, tmp_path, capsys):
    model, source = source_model(tmp_path, chans, side, mean, std)
    pth, back = tmp_path / "timm" / "model.pth", tmp_path / "back.safetensors"
    pth.parent.mkdir()
    assert main(["convert", str(source), str(pth), "--to", "timm"]) == 0
    assert main(["convert", str(pth), str(back)]) == 0
    capsys.readouterr()
    for path in (pth, back):
        read = load_checkpoint(path)
        assert read.data.mean == mean and read.data.std == std, (path.name, read.data.mean, read.data.std)
        assert read.data.in_chans == chans and tuple(read.data.image_size) == (side, side)
        assert read.data.classes == ["ant", "bee", "cat"] and "mean/std" not in read.guessed
        pixels = np.random.default_rng(1).integers(0, 256, (3, side + 5, side + 3, chans), dtype=np.uint8)
        pre, want_pre = read.data.preprocess(), load_checkpoint(source).data.preprocess()
        images = [Image.fromarray(p[..., 0] if chans == 1 else p) for p in pixels]
        x = torch.stack([pre.eval_input(im) for im in images])
        torch.testing.assert_close(x, torch.stack([want_pre.eval_input(im) for im in images]), rtol=0, atol=0)
        with torch.no_grad():
            got, want = read.model.eval()(x).softmax(-1), model(x).softmax(-1)
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)

    # timm, the oracle: its model from the config's architecture and args takes the state dict and computes the
    # same outputs; its resolve_data_config reads the same input size, mean and std from the config
    config = json.loads((pth.parent / "config.json").read_text())
    net = timm.create_model(
        config["architecture"],
        pretrained=False,
        **{**config["model_args"], "num_classes": config["num_classes"], "in_chans": chans},
    ).eval()
    net.load_state_dict(torch.load(pth, weights_only=True))
    resolved = resolve_data_config(pretrained_cfg=config["pretrained_cfg"])
    assert tuple(resolved["mean"]) == mean and tuple(resolved["std"]) == std
    assert tuple(resolved["input_size"]) == (chans, side, side)
    x = torch.rand(2, chans, side, side)
    with torch.no_grad():
        torch.testing.assert_close(net(x), model(x), rtol=0, atol=1e-5)


def test_predict_of_the_torch_file_gives_the_sources_probabilities(tmp_path, capsys):
    _, source = source_model(tmp_path, 1, 8, *DIGITS)
    pth = tmp_path / "model.pth"
    assert main(["convert", str(source), str(pth), "--to", "timm"]) == 0
    images = tmp_path / "images"
    images.mkdir()
    for i, grey in enumerate(np.random.default_rng(2).integers(0, 256, (4, 11, 9), dtype=np.uint8)):
        Image.fromarray(grey).save(images / f"{i}.png")
    rows = {}
    for name, model in (("source", source), ("pth", pth)):
        out = tmp_path / f"{name}.csv"
        assert main(["predict", str(model), str(images), "--out", str(out), "--device", "cpu"]) == 0
        rows[name] = out.read_text()
    assert rows["pth"] == rows["source"]


def test_a_config_json_that_is_not_this_models_is_refused_in_one_line(tmp_path, capsys):
    _, first = source_model(tmp_path, 1, 8, (0.5,), (0.25,), name="first")
    _, second = source_model(tmp_path, 1, 8, *DIGITS, seed=1, name="second")
    folder = tmp_path / "out"
    folder.mkdir()
    place = folder / "config.json"
    for foreign in ('{"model_type": "vit"}', "not json", json.dumps({"architecture": "resnet50"})):
        place.write_text(foreign)
        assert main(["convert", str(first), str(folder / "a.pth"), "--to", "timm"]) == 2
        line = one_error(capsys)
        assert f"{place} exists and is not this model's timm config" in line and "--overwrite" in line, line
        assert place.read_text() == foreign and not (folder / "a.pth").exists()  # nothing written
    assert main(["convert", str(first), str(folder / "a.pth"), "--to", "timm", "--overwrite"]) == 0
    assert load_checkpoint(folder / "a.pth").data.mean == (0.5,)
    # the same model again beside its own config.json: taken; another model into that folder: refused
    assert main(["convert", str(first), str(folder / "a.pt"), "--to", "timm"]) == 0
    kept = place.read_text()
    assert main(["convert", str(second), str(folder / "b.pth"), "--to", "timm"]) == 2
    assert "is not this model's timm config" in one_error(capsys)
    assert place.read_text() == kept and not (folder / "b.pth").exists()
