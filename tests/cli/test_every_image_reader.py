"""Every command that reads an image file goes through the one image door (``vitlab.data.image.decode_image``):
a 16-bit PNG is read as the 8-bit PNG of the same picture (scaled 65535 -> 255, not clipped), and a
decompression bomb (a header claiming 400 megapixels) is one line on stderr, never PIL's traceback.

Commands: ``predict`` with each kind of checkpoint (classifier, segmenter, detector, promptable, CLIP),
``evaluate`` of a folder of images, ``explain`` of an image of such a folder."""

import struct
import zlib

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data.shapes import SHAPE_CLASSES
from vitlab.models import build_registered
from vitlab.models.dense import DenseConfig, DenseModel
from vitlab.models.promptable import PromptableConfig, PromptableModel
from vitlab.runs import DataConfig, save_checkpoint

SIDE = 16


def chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def bomb(path):
    """A PNG claiming 20000 x 20000 grey pixels (400 megapixels) in a few dozen bytes."""
    ihdr = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
    idat = zlib.compress(b"\x00" * 1024)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", idat) + chunk(b"IEND", b""))
    return path


def pair(folder, name, seed, side=SIDE):
    """The same dark picture as an 8-bit PNG and as a 16-bit one (each 8-bit value v stored as 257 v)."""
    pixels = (np.random.default_rng(seed).random((side, side)) * 90).astype(np.uint8)
    eight, sixteen = folder / f"{name}-8.png", folder / f"{name}-16.png"
    Image.fromarray(pixels).save(eight)
    Image.fromarray(pixels.astype(np.uint16) * 257).save(sixteen)
    assert Image.open(sixteen).mode.startswith("I")  # a real 16-bit file, not an 8-bit one
    return eight, sixteen


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One untrained checkpoint of every kind `vitlab predict` reads an image with."""
    folder = tmp_path_factory.mktemp("kinds")
    torch.manual_seed(0)
    made = {}
    grey = DataConfig((SIDE, SIDE), 1, (0.2,), (0.3,), ["dark", "light"], dataset="folder")
    made["classifier"] = save_checkpoint(
        build_registered("vit-digits", img_size=SIDE, patch_size=4, depth=1, embed_dim=16, num_heads=2, num_classes=2),
        folder / "classifier.safetensors",
        "classifier",
        grey,
    )
    for task, head, kind in (("segment", "linear", "segmenter"), ("detect", "detr", "detector")):
        config = DenseConfig(
            task=task,
            head=head,
            num_classes=len(SHAPE_CLASSES),
            img_size=SIDE,
            patch_size=4,
            embed_dim=16,
            depth=1,
            num_heads=2,
        )
        made[kind] = save_checkpoint(
            DenseModel(config),
            folder / f"{kind}.safetensors",
            kind,
            DataConfig.raw_pixels(SIDE, SHAPE_CLASSES, "shapes"),
        )
    promptable = PromptableModel(PromptableConfig(img_size=SIDE, patch_size=4, embed_dim=16, depth=1, num_heads=2))
    made["promptable"] = save_checkpoint(
        promptable,
        folder / "promptable.safetensors",
        "promptable",
        DataConfig.raw_pixels(SIDE, SHAPE_CLASSES, "shapes"),
    )
    clip = build_registered("clip-shapes")
    made["clip"] = save_checkpoint(
        clip,
        folder / "clip.safetensors",
        "clip",
        DataConfig.raw_pixels(32, SHAPE_CLASSES, "shapes"),
        name="clip-shapes",
    )
    return made


EXTRA = {"promptable": ["--point", "8,8"], "clip": ["--captions", "a red circle", "a blue square"]}
KINDS = ["classifier", "segmenter", "detector", "promptable", "clip"]


def predict(checkpoint, image, kind, out):
    args = ["predict", str(checkpoint), str(image), "--device", "cpu", *EXTRA.get(kind, [])]
    return main(args + (["--out", str(out)] if kind not in ("classifier", "clip") else []))


@pytest.mark.parametrize("kind", KINDS)
def test_predict_reads_a_16_bit_png_as_its_8_bit_picture(kind, checkpoints, tmp_path, capsys):
    eight, sixteen = pair(tmp_path, "picture", 0)
    outputs = []
    for image in (eight, sixteen):
        out = tmp_path / f"{image.stem}-overlay.png"
        assert predict(checkpoints[kind], image, kind, out) == 0
        printed = capsys.readouterr().out.replace(str(image), "IMAGE").replace(str(out), "OUT")
        overlay = np.asarray(Image.open(out)) if out.exists() else None
        outputs.append((printed, overlay))
    assert outputs[0][0] == outputs[1][0]
    if outputs[0][1] is not None:
        assert np.array_equal(outputs[0][1], outputs[1][1])


@pytest.mark.parametrize("kind", KINDS)
def test_predict_refuses_a_bomb_in_one_line(kind, checkpoints, tmp_path, capsys):
    image = bomb(tmp_path / "bomb.png")
    assert predict(checkpoints[kind], image, kind, tmp_path / "overlay.png") == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert "Traceback" not in err and len(lines) == 1, err
    assert "bomb.png: 400,000,000 pixels is over the limit" in lines[0]
    assert not (tmp_path / "overlay.png").exists()


def folder_of(root, bits: int, with_bomb: bool = False):
    """A folder dataset: ``dark/`` and ``light/``, eight images each, written at ``bits`` per pixel."""
    for label, level in (("dark", 40), ("light", 200)):
        (root / label).mkdir(parents=True)
        for i in range(8):
            pixels = np.clip(np.random.default_rng(i).normal(level, 20, (SIDE, SIDE)), 0, 255).astype(np.uint8)
            data = pixels.astype(np.uint16) * 257 if bits == 16 else pixels
            Image.fromarray(data).save(root / label / f"{i}.png")
    if with_bomb:
        bomb(root / "dark" / "bomb.png")
    return root


@pytest.mark.slow
def test_evaluate_and_explain_read_a_folder_of_16_bit_pngs_as_its_8_bit_pictures(checkpoints, tmp_path, capsys):
    eight, sixteen = folder_of(tmp_path / "eight", 8), folder_of(tmp_path / "sixteen", 16)
    model = str(checkpoints["classifier"])
    printed = []
    for folder in (eight, sixteen):
        assert main(["evaluate", model, "--dataset", "folder", "--data-dir", str(folder), "--device", "cpu"]) == 0
        printed.append(capsys.readouterr().out)
    assert printed[0] == printed[1] and "accuracy" in printed[0]
    explained = []
    for folder in (eight, sixteen):
        out = tmp_path / f"explain-{folder.name}"
        args = ["explain", model, "--dataset", "folder", "--data-dir", str(folder), "--device", "cpu"]
        assert main([*args, "--out", str(out)]) == 0
        capsys.readouterr()
        explained.append((out / "explain.json").read_text().replace(str(out), "OUT").replace(str(folder), "DATA"))
    assert explained[0] == explained[1]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "explain"])
def test_evaluate_and_explain_refuse_a_bomb_in_the_folder_in_one_line(command, checkpoints, tmp_path, capsys):
    """A command reads only the split it scores, so the bomb is refused by the command that reads its split."""
    folder = folder_of(tmp_path / "data", 8, with_bomb=True)
    args = [command, str(checkpoints["classifier"]), "--dataset", "folder", "--data-dir", str(folder)]
    refused = []
    for split in ("train", "val", "test"):
        code = main([*args, "--split", split, "--device", "cpu", "--out", str(tmp_path / f"out-{split}")])
        err = capsys.readouterr().err
        assert "Traceback" not in err and code in (0, 2), err
        if code == 2:
            lines = [line for line in err.strip().splitlines() if ": warning: " not in line]
            assert len(lines) == 1 and "bomb.png: 400,000,000 pixels is over the limit" in lines[0], lines
            refused.append(split)
    assert len(refused) == 1, refused
