"""A cached hub model's JSON files, mutated one field at a time: ``vitlab predict`` reads each through its schema and
refuses a bad field in one line naming the file and the field (exit 2), never a traceback."""

import json
import os
import socket
import time
from pathlib import Path

import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data.config import DataConfig
from vitlab.interop import export_hf, export_timm
from vitlab.models.vit import VisionTransformer
from vitlab.models.vit_config import ViTConfig

HF, TIMM = "org/hf-vit", "timm/tiny-vit.test"
PROCESSOR = {
    "image_processor_type": "ViTImageProcessor",
    "do_resize": True,
    "size": {"height": 32, "width": 32},
    "do_center_crop": False,
    "crop_size": {"height": 32, "width": 32},
    "rescale_factor": 1 / 255,
    "image_mean": [0.5] * 3,
    "image_std": [0.5] * 3,
}

# (repo, file, field: dotted, None for the whole file, bad value)
MUTATIONS = [
    *((HF, "config.json", None, bad) for bad in (None, 5, [])),
    (HF, "config.json", "num_attention_heads", 0),
    (HF, "config.json", "hidden_size", "32"),
    (HF, "config.json", "image_size", -32),
    (HF, "config.json", "patch_size", [8, "8"]),
    (HF, "config.json", "layer_norm_eps", 0),
    (HF, "config.json", "id2label", 5),
    (HF, "preprocessor_config.json", None, []),
    (HF, "preprocessor_config.json", "rescale_factor", 0),
    (HF, "preprocessor_config.json", "crop_size", 0),
    (HF, "preprocessor_config.json", "size", {"shortest_edge": 0}),
    (HF, "preprocessor_config.json", "size", -1),
    (HF, "preprocessor_config.json", "image_std", [0, 0, 0]),
    (HF, "preprocessor_config.json", "image_mean", "0.5"),
    (TIMM, "config.json", None, None),
    (TIMM, "config.json", "pretrained_cfg", 5),
    (TIMM, "config.json", "pretrained_cfg", []),
    (TIMM, "config.json", "pretrained_cfg.input_size", [3, 0, 32]),
    (TIMM, "config.json", "pretrained_cfg.crop_pct", 0),
    (TIMM, "config.json", "pretrained_cfg.mean", "x"),
    (TIMM, "config.json", "model_args", "x"),
    (TIMM, "config.json", "model_args.num_heads", 0),
    (TIMM, "config.json", "label_names", 3),
]


@pytest.fixture
def cached(hub_cache, tmp_path):
    """``cached(repo, mutate)``: the tiny model of ``repo`` (a transformers or timm folder) in the hub cache,
    ``mutate(folder)`` applied to its files first."""
    model = VisionTransformer(ViTConfig(img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=2, num_classes=2))
    data = DataConfig((32, 32), 3, (0.5,) * 3, (0.5,) * 3, ["a", "b"])

    def cache(repo, mutate=lambda folder: None):
        folder = tmp_path / repo.replace("/", "_")
        if repo == HF:
            export_hf(model.eval(), folder, ["a", "b"])
            (folder / "preprocessor_config.json").write_text(json.dumps(PROCESSOR))
        else:
            export_timm(model.eval(), folder, data)
        mutate(folder)
        hub_cache(repo, folder)
        return repo

    return cache


@pytest.fixture
def image(tmp_path):
    Image.new("RGB", (40, 40), (120, 30, 200)).save(tmp_path / "x.png")
    return str(tmp_path / "x.png")


def _set(folder, file, field, value):
    path = folder / file
    obj = json.loads(path.read_text())
    if field is None:
        obj = value
    else:
        *outer, last = field.split(".")
        inner = obj
        for key in outer:
            inner = inner[key]
        inner[last] = value
    path.write_text(json.dumps(obj))


@pytest.mark.parametrize("repo", [HF, TIMM])
def test_the_unmutated_files_predict(repo, cached, image, capsys):
    assert main(["predict", cached(repo), image, "--device", "cpu"]) == 0
    assert "x.png" in capsys.readouterr().out


@pytest.mark.parametrize(("repo", "file", "field", "bad"), MUTATIONS)
def test_a_bad_field_is_one_line_naming_file_and_field(repo, file, field, bad, cached, image, capsys):
    source = cached(repo, lambda folder: _set(folder, file, field, bad))
    assert main(["predict", source, image, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert file in err and (field is None or f"'{field}'" in err), err


def _cast(folder, name, dtype):
    from safetensors import safe_open
    from safetensors.torch import save_file

    path = folder / "model.safetensors"
    with safe_open(str(path), "pt") as f:
        tensors, meta = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()  # noqa: SIM118
    tensors[name] = tensors[name].to(dtype)
    save_file(tensors, str(path), meta)


@pytest.mark.parametrize("repo", [HF, TIMM])
@pytest.mark.parametrize(
    ("dtype", "refused"), [(torch.int8, True), (torch.bool, True), (torch.float16, False), (torch.bfloat16, False)]
)
def test_weights_of_a_dtype_that_is_not_float_are_refused_not_cast(repo, dtype, refused, cached, image, capsys):
    name = "head.weight" if repo == TIMM else "classifier.weight"
    source = cached(repo, lambda folder: _cast(folder, name, dtype))
    assert main(["predict", source, image, "--device", "cpu"]) == (2 if refused else 0)
    err = capsys.readouterr().err.strip()
    if refused:
        assert len(err.splitlines()) == 1 and "head.weight" in err and str(dtype).removeprefix("torch.") in err, err


@pytest.mark.parametrize("revision", ["../../x", "a/../b", ".git", "/etc", "main/", "x.lock", "a..b"])
def test_a_revision_that_could_climb_out_is_refused(revision, cached, image, capsys):
    assert main(["predict", f"{cached(HF)}@{revision}", image, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and repr(revision) in err and "Traceback" not in err, err


@pytest.mark.parametrize("ref", ["../../x", "main/../../../etc", "", "0123abc", "g" * 40])
def test_a_cached_ref_that_is_not_a_commit_hash_is_refused(ref, cached, image, capsys):
    repo = cached(TIMM)
    (Path(os.environ["HF_HUB_CACHE"]) / f"models--{repo.replace('/', '--')}" / "refs" / "main").write_text(ref)
    assert main(["predict", repo, image, "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "refs/main" in err and "not a commit hash" in err, err


def test_a_hub_that_accepts_and_never_answers_is_given_up_at_the_deadline(hub_cache, image, capsys, monkeypatch):
    with socket.create_server(("127.0.0.1", 0)) as server:  # listens; nothing ever reads or answers
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.delenv("HF_HUB_OFFLINE")
        monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)  # read at its import
        monkeypatch.setenv("VITLAB_HUB_TIMEOUT", "1")
        start = time.monotonic()
        assert main(["predict", "org/slow-vit", image, "--device", "cpu"]) == 1
        took = time.monotonic() - start
    err = capsys.readouterr().err.strip()
    assert took < 5 and len(err.splitlines()) == 1 and "within 1 s (VITLAB_HUB_TIMEOUT)" in err, (took, err)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_hub_deadline_is_one_line(value, hub_cache, image, capsys, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("VITLAB_HUB_TIMEOUT", value)
    assert main(["predict", "org/any-vit", image, "--device", "cpu"]) == 2
    assert "VITLAB_HUB_TIMEOUT" in capsys.readouterr().err
