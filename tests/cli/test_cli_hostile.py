"""Bad and hostile input to every command that reads a model, an image or a path: one line on stderr,
exit 2 (bad input) or 1 (a run failed), never a traceback and never a partial output."""

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from vitlab.cli.main import main
from vitlab.models import build_registered
from vitlab.runs import DataConfig, save_checkpoint


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A valid (untrained) digits classifier checkpoint and a valid 8x8 image."""
    folder = tmp_path_factory.mktemp("good")
    data = DataConfig((8, 8), 1, (0.3,), (0.4,), [str(i) for i in range(10)], dataset="digits")
    checkpoint = save_checkpoint(
        build_registered("vit-digits", depth=1, embed_dim=32),
        folder / "model.safetensors",
        "classifier",
        data,
        name="vit-digits",
    )
    image = folder / "digit.png"
    Image.fromarray((np.random.default_rng(0).random((8, 8)) * 255).astype(np.uint8)).save(image)
    return checkpoint, image


def png_header(width: int, height: int) -> bytes:
    """The first chunks of a PNG claiming ``width x height`` pixels, with almost no data (a bomb's header)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + chunk


BAD_FILES = {
    "empty": b"",
    "random": np.random.default_rng(1).bytes(4096),
    "text": b"this is not a model\n",
    "json": b'{"state_dict": [1, 2, 3]}',
    "huge-header": struct.pack("<Q", 2**60) + b"{}",
    "pickle": b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x94\x8c\x06system\x94\x93\x94.",
}


def one_line_error(capsys) -> str:
    """The one error line on stderr (warnings aside)."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and ": error: " in lines[0], err
    return lines[0]


@pytest.mark.parametrize("suffix", [".safetensors", ".pth"])
@pytest.mark.parametrize("kind", sorted(BAD_FILES))
@pytest.mark.parametrize("command", ["evaluate", "explain", "predict", "convert", "export", "init", "teacher"])
def test_a_bad_checkpoint_is_refused_in_one_line(kind, command, suffix, good, tmp_path, capsys):
    bad = tmp_path / f"{kind}{suffix}"
    bad.write_bytes(BAD_FILES[kind])
    out = tmp_path / "out"
    argv = {
        "evaluate": ["evaluate", str(bad)],
        "explain": ["explain", str(bad), "--out", str(out)],
        "predict": ["predict", str(bad), str(good[1])],
        "convert": ["convert", str(bad), str(out / "x.safetensors")],
        "export": ["export", str(bad), "--to", "timm", "--out", str(out)],
        "init": ["train", "--init", str(bad), "--epochs", "1", "--quiet", "--out", str(out)],
        "teacher": ["train", "--teacher", str(bad), "--distill", "soft", "--epochs", "1", "--quiet", "--out", str(out)],
    }[command]
    assert main(argv) == 2
    assert str(bad.name) in one_line_error(capsys)
    assert not out.exists()


def test_flipped_tensor_bytes_are_noticed(good, tmp_path, capsys):
    blob = bytearray(good[0].read_bytes())
    blob[-7] ^= 0xFF
    corrupt = tmp_path / "corrupt.safetensors"
    corrupt.write_bytes(bytes(blob))
    assert main(["evaluate", str(corrupt)]) == 2
    assert "corrupt" in one_line_error(capsys)


@pytest.mark.parametrize(
    "name, content",
    [("empty.png", b""), ("text.png", b"hello"), ("truncated.png", None), ("bomb.png", png_header(60000, 60000))],
)
def test_a_bad_image_is_refused_in_one_line(name, content, good, tmp_path, capsys):
    image = tmp_path / name
    image.write_bytes(good[1].read_bytes()[:40] if content is None else content)
    assert main(["predict", str(good[0]), str(image)]) == 2
    assert name in one_line_error(capsys)


def test_a_folder_without_images_is_refused(good, tmp_path, capsys):
    assert main(["predict", str(good[0]), str(tmp_path)]) == 2
    assert "no image files" in one_line_error(capsys)


@pytest.mark.parametrize("command", ["train", "evaluate", "explain", "pretrain", "convert", "predict", "download"])
def test_an_output_path_under_a_regular_file_is_refused(command, good, tmp_path, capsys):
    blocker = tmp_path / "some.png"
    blocker.write_bytes(b"x")
    out = str(blocker / "x")
    argv = {
        "train": ["train", "--epochs", "1", "--quiet", "--out", out],
        "evaluate": ["evaluate", str(good[0]), "--out", out, "--dataset", "digits"],
        "explain": ["explain", str(good[0]), "--out", out],
        "pretrain": ["pretrain", "mae", "--epochs", "1", "--out", out],
        "convert": ["convert", str(good[0]), out + ".safetensors"],
        "predict": ["predict", str(good[0]), str(good[1]), "--out", out + ".csv"],
        "download": ["data", "download", "mnist", "--data-dir", out],
    }[command]
    assert main(argv) == 2
    assert "some.png" in one_line_error(capsys)


@pytest.mark.parametrize("device", ["banana", "cuda:7", "mps"])
@pytest.mark.parametrize("command", ["train", "evaluate", "predict"])
def test_a_device_the_machine_lacks_is_refused(device, command, good, capsys):
    import torch

    if (
        device.startswith("cuda")
        and torch.cuda.device_count() > 7
        or device == "mps"
        and torch.backends.mps.is_available()
    ):
        pytest.skip("this machine has that device")
    argv = {
        "train": ["train", "--epochs", "1", "--quiet", "--device", device],
        "evaluate": ["evaluate", str(good[0]), "--device", device],
        "predict": ["predict", str(good[0]), str(good[1]), "--device", device],
    }[command]
    assert main(argv) == 2
    assert device.split(":")[0] in one_line_error(capsys)


@pytest.mark.parametrize("threads", ["0", "-2"])
def test_thread_counts_below_one_are_refused(threads, capsys):
    assert main(["train", "--epochs", "1", "--quiet", "--threads", threads]) == 2
    assert "--threads" in one_line_error(capsys)


@pytest.mark.parametrize(
    "setting",
    [
        "num_heads=0",
        "depth=-1",
        "depth=0",
        "embed_dim=0",
        "patch_size=0",
        "mlp_ratio=-1",
        "drop_path_rate=2",
        "attn_drop_rate=-0.5",
        "reg_tokens=-3",
        "num_classes=0",
        "num_classes=3",
        "depth=abc",
        "seed=-1",
        "lr=nan",
        "distill_alpha=5",
        "label_smoothing=1",
        "nonsense=1",
    ],
)
def test_settings_that_make_no_sense_are_refused_by_name(setting, capsys):
    assert main(["train", "--epochs", "1", "--quiet", "--set", setting]) == 2
    assert setting.split("=")[0] in one_line_error(capsys)


def test_ctrl_c_during_training_prints_one_line_and_exits_130(monkeypatch, tmp_path, capsys):
    import vitlab.tasks

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(vitlab.tasks, "run", interrupted)
    assert main(["train", "--epochs", "1", "--quiet", "--out", str(tmp_path / "run")]) == 130
    lines = [line for line in capsys.readouterr().err.splitlines() if ": warning: " not in line]
    assert len(lines) == 1 and lines[0].endswith("continues with --resume)")


def test_debug_shows_the_traceback(good, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"")
    from vitlab.errors import CheckpointError

    with pytest.raises(CheckpointError):
        main(["--debug", "evaluate", str(bad)])
