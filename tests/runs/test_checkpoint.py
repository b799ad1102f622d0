"""The one checkpoint format: round trips, sources, checksum, hostile files, the formats vitlab wrote before."""

import json
import random
import struct

import pytest
import torch
from safetensors.torch import save_file

from vitlab.errors import CheckpointError, ConfigError, RunFolderError
from vitlab.models import build_registered
from vitlab.models.dense import DenseConfig, DenseModel
from vitlab.runs import DataConfig, load_checkpoint, load_matching_weights, save_checkpoint
from vitlab.runs.convert import convert

TINY = {"depth": 1, "embed_dim": 32, "num_heads": 2}
DATA = DataConfig((8, 8), 1, (0.3,), (0.2,), [str(i) for i in range(10)], dataset="digits", seed=3, rows=100)


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Every parameter moved off its init value, so no mapping is right by accident."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model.eval()


def same_outputs(a: torch.nn.Module, b: torch.nn.Module, images: torch.Tensor) -> None:
    with torch.no_grad():
        out_a, out_b = a.eval()(images), b.eval()(images)
    if isinstance(out_a, dict):
        assert out_a.keys() == out_b.keys()
        for k in out_a:
            assert torch.equal(out_a[k], out_b[k]), k
    else:
        assert torch.equal(out_a, out_b)


@pytest.fixture
def vit_file(tmp_path):
    model = perturbed(build_registered("vit-digits", **TINY))
    return model, save_checkpoint(model, tmp_path / "model.safetensors", "classifier", DATA)


@pytest.mark.parametrize(
    "name, kind, overrides",
    [
        ("vit-digits", "classifier", TINY),
        ("cnn-digits", "classifier", {}),
        ("vit-digits", "distilled-classifier", {**TINY, "distill_token": True}),
    ],
)
def test_checkpoint_rebuilds_model_and_data_config(tmp_path, name, kind, overrides):
    model = perturbed(build_registered(name, **overrides))
    save_checkpoint(model, tmp_path / "m.safetensors", kind, DATA, provenance={"epoch": 4})
    loaded = load_checkpoint(tmp_path / "m.safetensors")
    assert (loaded.kind, loaded.name, loaded.data, loaded.guessed) == (kind, name, DATA, {})
    assert loaded.metadata["provenance"]["epoch"] == 4 and not loaded.model.training
    same_outputs(loaded.model, model, torch.rand(3, 1, 8, 8))


def test_run_folder_reads_best_then_last(tmp_path):
    first, second = (perturbed(build_registered("vit-digits", **TINY)) for _ in range(2))
    save_checkpoint(first, tmp_path / "last" / "model.safetensors", "classifier", DATA)
    assert load_checkpoint(tmp_path).path == tmp_path / "last" / "model.safetensors"
    save_checkpoint(second, tmp_path / "best" / "model.safetensors", "classifier", DATA)
    loaded = load_checkpoint(tmp_path)
    assert loaded.path == tmp_path / "best" / "model.safetensors"
    same_outputs(loaded.model, second, torch.rand(2, 1, 8, 8))
    assert load_checkpoint(tmp_path / "last").path == tmp_path / "last" / "model.safetensors"


def test_missing_checkpoint_says_what_to_pass(tmp_path):
    with pytest.raises(CheckpointError, match="run folder"):
        load_checkpoint(tmp_path / "absent")
    with pytest.raises(CheckpointError, match=r"no checkpoint in folder .*best/model.safetensors"):
        load_checkpoint(tmp_path)


def test_only_safetensors_and_known_kinds_are_written(tmp_path):
    model = build_registered("vit-digits", **TINY)
    with pytest.raises(ConfigError, match=".safetensors"):
        save_checkpoint(model, tmp_path / "m.pth", "classifier", DATA)
    with pytest.raises(ConfigError, match="kind"):
        save_checkpoint(model, tmp_path / "m.safetensors", "regressor", DATA)
    with pytest.raises(ConfigError, match="no config"):
        save_checkpoint(torch.nn.Linear(2, 2), tmp_path / "m.safetensors", "classifier", DATA)


def test_a_newer_format_is_refused(tmp_path, vit_file):
    model, path = vit_file
    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(
        tensors,
        tmp_path / "new.safetensors",
        metadata={"format": '"vitlab"', "format_version": "2", "model": '"vit-digits"', "kind": '"classifier"'},
    )
    with pytest.raises(CheckpointError, match="format 2.*upgrade vitlab"):
        load_checkpoint(tmp_path / "new.safetensors")


def tensor_region(blob: bytes) -> tuple[int, int]:
    (n,) = struct.unpack("<Q", blob[:8])
    return 8 + n, len(blob)


@pytest.mark.parametrize("seed", range(4))
def test_flipped_tensor_bytes_are_caught_by_the_checksum(tmp_path, vit_file, seed):
    _, path = vit_file
    blob = bytearray(path.read_bytes())
    start, end = tensor_region(blob)
    rng = random.Random(seed)
    for _ in range(rng.randint(1, 3)):
        blob[rng.randrange(start, end)] ^= rng.randint(1, 255)
    bad = tmp_path / "flipped.safetensors"
    bad.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match=r"flipped.safetensors is corrupt.*SHA-256"):
        load_checkpoint(bad)


def hostile_files(blob: bytes, seed: int) -> dict[str, bytes]:
    """Files that are not checkpoints, derived from a valid one with ``seed``."""
    rng = random.Random(seed)
    start, _ = tensor_region(blob)
    foreign_json = json.dumps({"hello": ["world", seed]}).encode()
    wrong_offsets = json.dumps({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 64]}}).encode()
    return {
        "empty": b"",
        "short": blob[: rng.randint(1, 7)],
        "truncated-header": blob[: rng.randint(8, start - 1)],
        "truncated-tensors": blob[: rng.randint(start, len(blob) - 1)],
        "random": rng.randbytes(rng.randint(1, 4096)),
        "json": foreign_json,
        "json-with-length": struct.pack("<Q", len(foreign_json)) + foreign_json,
        "wrong-offsets": struct.pack("<Q", len(wrong_offsets)) + wrong_offsets + b"\0" * 8,
        "huge-header": struct.pack("<Q", 2**62) + blob[8:],
    }


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
def test_hostile_files_raise_checkpoint_errors_naming_the_file(tmp_path, vit_file, seed, suffix):
    _, path = vit_file
    for label, data in hostile_files(path.read_bytes(), seed).items():
        bad = tmp_path / f"{label}-{seed}{suffix}"
        bad.write_bytes(data)
        with pytest.raises(CheckpointError) as info:
            load_checkpoint(bad)
        assert type(info.value) is CheckpointError and bad.name in str(info.value), (label, str(info.value))


@pytest.mark.parametrize("seed", range(6))
def test_flipped_header_bytes_load_or_raise_checkpoint_errors(tmp_path, vit_file, seed):
    model, path = vit_file
    blob = bytearray(path.read_bytes())
    start, _ = tensor_region(blob)
    rng = random.Random(seed)
    blob[rng.randrange(8, start)] ^= rng.randint(1, 255)
    bad = tmp_path / f"header-{seed}.safetensors"
    bad.write_bytes(bytes(blob))
    try:
        loaded = load_checkpoint(bad)
    except CheckpointError as err:
        assert bad.name in str(err)
    else:  # a flip inside a value that still parses: the weights are intact
        same_outputs(loaded.model, model, torch.rand(2, 1, 8, 8))


def test_foreign_tensors_are_refused(tmp_path):
    save_file({"foo": torch.zeros(3)}, tmp_path / "foreign.safetensors")
    torch.save({"bar": torch.zeros(3)}, tmp_path / "foreign.pth")
    torch.save({"epoch": 3, "args": "x"}, tmp_path / "dict.pth")
    for name in ("foreign.safetensors", "foreign.pth", "dict.pth"):
        with pytest.raises(CheckpointError, match=name):
            load_checkpoint(tmp_path / name)


# -- files written before format 1, built exactly as the old writers built them ------------------------


def old_save_weights(model: torch.nn.Module, path, metadata: dict) -> None:
    """vitlab.train.checkpoint.save_weights: the state dict, each metadata value a JSON string."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(tensors, str(path), metadata={k: json.dumps(v) for k, v in metadata.items()})


def old_train_metadata(model: torch.nn.Module, **extra) -> dict:
    return {
        "model": "vit-digits",
        "config": model.config.to_dict(),
        "dataset": "digits",
        "data_dir": None,
        "rows": 100,
        "seed": 3,
        "classes": [str(i) for i in range(10)],
        "mean": [0.3],
        "std": [0.2],
        "epoch": 2,
        "weights": "model",
        "vitlab": "0.3.0",
        **extra,
    }


def test_old_train_checkpoint_loads(tmp_path):
    model = perturbed(build_registered("vit-digits", **TINY))
    old_save_weights(model, tmp_path / "model.safetensors", old_train_metadata(model))
    loaded = load_checkpoint(tmp_path)
    assert loaded.kind == "classifier" and loaded.name == "vit-digits"
    assert (loaded.data.dataset, loaded.data.rows, loaded.data.seed, loaded.data.mean) == ("digits", 100, 3, (0.3,))
    same_outputs(loaded.model, model, torch.rand(3, 1, 8, 8))


def test_old_distilled_student_loads(tmp_path):
    student = perturbed(build_registered("vit-digits", **TINY, distill_token=True))
    assert {"dist_token", "head_dist.weight"} <= set(student.state_dict())
    meta = old_train_metadata(student, distilled=True)
    del meta["config"]["distill_token"]  # the old student's config was the plain ViT's
    old_save_weights(student, tmp_path / "model.safetensors", meta)
    loaded = load_checkpoint(tmp_path / "model.safetensors")
    assert loaded.kind == "distilled-classifier" and loaded.model.config.distill_token
    same_outputs(loaded.model, student, torch.rand(3, 1, 8, 8))


def test_old_pretrained_encoder_loads(tmp_path):
    encoder = perturbed(build_registered("vit-digits", **TINY, num_classes=0))
    old_save_weights(
        encoder, tmp_path / "model.safetensors", old_train_metadata(encoder, weights="mae-encoder", pretrain="mae")
    )
    loaded = load_checkpoint(tmp_path)
    assert loaded.kind == "encoder"
    same_outputs(loaded.model, encoder, torch.rand(3, 1, 8, 8))


def test_old_interop_file_loads(tmp_path):
    model = perturbed(build_registered("vit-digits", **TINY))
    # vitlab.interop.save_checkpoint: write_state_dict(state, path, {"vitlab_config": json}) with format "pt"
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()},
        str(tmp_path / "vit.safetensors"),
        metadata={"format": "pt", "vitlab_config": json.dumps(model.config.to_dict())},
    )
    loaded = load_checkpoint(tmp_path / "vit.safetensors")
    assert loaded.kind == "classifier" and loaded.model.config == model.config
    same_outputs(loaded.model, model, torch.rand(3, 1, 8, 8))


def test_old_dense_checkpoint_loads(tmp_path):
    model = perturbed(
        DenseModel(
            DenseConfig(num_classes=2, img_size=16, patch_size=8, embed_dim=16, depth=1, num_heads=2, decoder_width=8)
        )
    )
    old_save_weights(
        model,
        tmp_path / "model.safetensors",  # vitlab.tasks.dense.predict.save_dense
        {"dense_config": model.config.to_dict(), "classes": ["a", "b"], "epoch": 1},
    )
    loaded = load_checkpoint(tmp_path)
    assert loaded.kind == "segmenter" and loaded.data.classes == ["a", "b"] and loaded.data.image_size == (16, 16)
    same_outputs(loaded.model, model, torch.rand(2, 3, 16, 16))


# -- matching weights and conversion ------------------------------------------------------------------


def test_matching_weights_leave_a_new_head(tmp_path, vit_file):
    source, path = vit_file
    target = build_registered("vit-digits", **TINY, num_classes=4)
    left = load_matching_weights(target, path)
    assert left == ["head.bias", "head.weight"]
    assert torch.equal(target.state_dict()["blocks.0.attn.qkv.weight"], source.state_dict()["blocks.0.attn.qkv.weight"])
    with pytest.raises(CheckpointError, match="too few weights"):
        load_matching_weights(build_registered("cnn-digits"), path)


def test_convert_keeps_everything_a_vitlab_file_records(tmp_path, vit_file):
    model, path = vit_file
    convert(path, tmp_path / "copy.safetensors")
    copy = load_checkpoint(tmp_path / "copy.safetensors")
    assert (copy.kind, copy.name, copy.data, copy.guessed) == ("classifier", "vit-digits", DATA, {})
    same_outputs(copy.model, model, torch.rand(2, 1, 8, 8))
    with pytest.raises(RunFolderError, match="exists"):
        convert(path, tmp_path / "copy.safetensors")
    convert(path, tmp_path / "copy.safetensors", overwrite=True)


def test_timm_file_written_by_convert_reads_back_without_guessing(tmp_path, vit_file):
    model, path = vit_file
    convert(path, tmp_path / "timm.safetensors", target="timm")
    back = load_checkpoint(tmp_path / "timm.safetensors")
    assert back.guessed == {} and back.data == DATA and back.kind == "classifier"
    assert back.model.config == model.config
    same_outputs(back.model, model, torch.rand(2, 1, 8, 8))
    convert(path, tmp_path / "timm.pth", target="timm")  # a torch file: timm's config.json beside it records it
    torch_file = load_checkpoint(tmp_path / "timm.pth")
    assert torch_file.guessed == {} and (torch_file.data.mean, torch_file.data.std) == (DATA.mean, DATA.std)
    same_outputs(torch_file.model, model, torch.rand(2, 1, 8, 8))


# -- the preprocessing a checkpoint records -------------------------------------------------------------


def test_a_data_config_without_the_preprocessing_fields_reads_as_before(tmp_path, vit_file):
    from safetensors.torch import load_file

    from vitlab.data.preprocess import Preprocess

    old = {k: v for k, v in DATA.to_dict().items() if k not in ("crop_pct", "crop_mode", "interpolation")}
    old = {k: v for k, v in old.items() if k not in ("resize_backend", "crop_rounding")}
    assert DataConfig.from_dict(old) == DATA
    assert DATA.preprocess() == Preprocess((8, 8), 1, mean=(0.3,), std=(0.2,))  # read_image's bilinear squash
    model, path = vit_file
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        meta = json.loads(f.read(n))["__metadata__"]
    meta = {k: v for k, v in meta.items() if k != "sha256"}
    meta["data"] = json.dumps(old)  # a file written before the fields existed
    save_file(load_file(path), str(tmp_path / "old.safetensors"), metadata=meta)
    loaded = load_checkpoint(tmp_path / "old.safetensors")
    assert loaded.data == DATA and loaded.data.preprocess().crop_mode == "squash"
    assert loaded.model.pretrained_cfg["interpolation"] == "bilinear" and loaded.model.pretrained_cfg["crop_pct"] == 1.0


def test_the_preprocessing_is_recorded_and_said_as_timm_reads_it(tmp_path):
    from vitlab.data.preprocess import Preprocess

    data = DATA.with_preprocess(Preprocess((8, 8), 1, 0.875, "center", "bicubic", (0.4,), (0.3,)))
    assert (data.crop_pct, data.crop_mode, data.interpolation, data.mean, data.classes) == (
        0.875,
        "center",
        "bicubic",
        (0.4,),
        DATA.classes,
    )
    model = perturbed(build_registered("vit-digits", **TINY))
    save_checkpoint(model, tmp_path / "m.safetensors", "classifier", data)
    loaded = load_checkpoint(tmp_path / "m.safetensors")
    assert loaded.data == data and loaded.data.preprocess() == Preprocess(
        (8, 8), 1, 0.875, "center", "bicubic", (0.4,), (0.3,)
    )
    cfg = loaded.model.pretrained_cfg
    assert (cfg["interpolation"], cfg["crop_pct"], cfg["crop_mode"], cfg["mean"]) == (
        "bicubic",
        0.875,
        "center",
        (0.4,),
    )
    convert(tmp_path / "m.safetensors", tmp_path / "timm.safetensors", target="timm")  # the round trip keeps it
    back = load_checkpoint(tmp_path / "timm.safetensors")
    assert back.data == data and back.guessed == {}


def test_a_timm_file_uses_the_pretrained_cfg_it_carries(tmp_path):
    from vitlab.interop import to_timm_state_dict, write_state_dict

    model = perturbed(build_registered("vit-digits", **TINY))
    state = to_timm_state_dict(model)
    cfg = {"input_size": [1, 8, 8], "interpolation": "bicubic", "crop_pct": 0.9, "mean": [0.1], "std": [0.7]}
    write_state_dict(state, tmp_path / "meta.safetensors", {"pretrained_cfg": json.dumps(cfg)})
    loaded = load_checkpoint(tmp_path / "meta.safetensors", num_heads=2)
    data = loaded.data
    assert (data.interpolation, data.crop_pct, data.crop_mode, data.mean, data.std) == (
        "bicubic",
        0.9,
        "center",  # timm's default crop_mode
        (0.1,),
        (0.7,),
    )
    assert "mean/std" not in loaded.guessed
    folder = tmp_path / "timm-folder"  # timm's layout: config.json beside the weights, heads by architecture
    write_state_dict(state, folder / "model.safetensors")
    config = {"architecture": "vit_tiny_patch16_224", "num_classes": 10, "global_pool": "avg", "pretrained_cfg": cfg}
    (folder / "config.json").write_text(
        json.dumps({**config, "model_args": {"num_heads": 2}, "label_names": list("abcdefghij")})
    )
    loaded = load_checkpoint(folder)
    assert loaded.model.config.num_heads == 2 and loaded.guessed == {} and loaded.data.classes == list("abcdefghij")
    assert loaded.data.crop_pct == 0.9
    same_outputs(loaded.model, model, torch.rand(2, 1, 8, 8))
    (folder / "config.json").write_text(json.dumps(config))  # no model_args: vit_tiny's 3 heads do not divide 32
    with pytest.raises(CheckpointError, match="num_heads"):
        load_checkpoint(folder)


def test_a_timm_export_carries_the_recorded_preprocessing_back(tmp_path):
    from vitlab.data.preprocess import Preprocess
    from vitlab.interop import export_timm

    model = perturbed(build_registered("vit-digits", **TINY))
    data = DATA.with_preprocess(Preprocess((8, 8), 1, 0.875, "center", "bicubic", (0.4,), (0.3,)))
    folder = export_timm(model, tmp_path / "timm", data)
    cfg = json.loads((folder / "config.json").read_text())["pretrained_cfg"]
    assert (cfg["interpolation"], cfg["crop_pct"], cfg["crop_mode"], cfg["mean"]) == ("bicubic", 0.875, "center", [0.4])
    back = load_checkpoint(folder)  # timm's layout: model.safetensors with config.json beside it
    assert back.guessed == {} and back.data.preprocess() == data.preprocess() and back.data.classes == DATA.classes
    same_outputs(back.model, model, torch.rand(2, 1, 8, 8))
