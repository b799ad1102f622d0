"""Hostile input: unreadable images, random bytes as IDX files and images, folders too small to split.
Every failure must be a DataError naming the file, never another exception type."""

import gzip
import io

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.cli.main import main
from vitlab.data import load_dataset, read_image
from vitlab.data.idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx
from vitlab.errors import DataError

FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP", "PPM")


def encoded(image: np.ndarray, fmt: str) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, fmt)
    return buffer.getvalue()


def test_read_image_gives_channels_height_width_in_unit_range(tmp_path, rng):
    pixels = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    (tmp_path / "a.png").write_bytes(encoded(pixels, "PNG"))
    image = read_image(tmp_path / "a.png")
    assert image.dtype == torch.float32 and image.shape == (3, 5, 7)
    torch.testing.assert_close(image, torch.from_numpy(pixels).permute(2, 0, 1) / 255)
    grey = read_image(tmp_path / "a.png", channels=1, size=4)
    assert grey.shape == (1, 4, 4) and 0 <= float(grey.min()) and float(grey.max()) <= 1


@pytest.mark.parametrize("kind", ["empty", "text", "truncated", "folder", "missing", "svg"])
def test_unreadable_images_name_the_file(tmp_path, rng, kind):
    path = tmp_path / f"{kind}.png"
    png = encoded(rng.integers(0, 256, (32, 32, 3), dtype=np.uint8), "PNG")
    contents = {
        "empty": b"",
        "text": b"hello, I am not an image\n",
        "truncated": png[: len(png) // 2],
        "svg": b'<svg xmlns="http://www.w3.org/2000/svg" width="9" height="9"/>',
    }
    if kind == "folder":
        path.mkdir()
    elif kind in contents:
        path.write_bytes(contents[kind])
    with pytest.raises(DataError, match=rf"{kind}.png: "):
        read_image(path)


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    path = tmp_path / "bomb.png"
    Image.new("1", (4000, 3000)).save(path)  # 12 megapixels in a few kilobytes
    assert path.stat().st_size < 20_000
    with pytest.raises(DataError, match=r"bomb.png: 4000x3000 pixels is over the limit of 1,000,000"):
        read_image(path, max_pixels=1_000_000)


def test_random_and_mutated_bytes_as_an_image_raise_only_data_errors(tmp_path):
    rng = np.random.default_rng(1)
    valid = {fmt: encoded(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8), fmt) for fmt in FORMATS}
    path = tmp_path / "fuzz.png"
    outcomes = {"read": 0, "refused": 0}
    for trial in range(600):
        data = bytearray(valid[FORMATS[trial % len(FORMATS)]])
        if trial % 3 == 0:
            data = data[: rng.integers(0, len(data))]
        elif trial % 3 == 1:
            for at in rng.integers(0, len(data), rng.integers(1, 8)):
                data[at] = rng.integers(0, 256)
        else:
            data = bytearray(rng.bytes(int(rng.integers(0, 300))))
        path.write_bytes(bytes(data))
        try:
            image = read_image(path, size=6)
        except DataError as err:
            assert "fuzz.png" in str(err)
            outcomes["refused"] += 1
        else:
            assert image.shape == (3, 6, 6) and 0 <= float(image.min()) and float(image.max()) <= 1
            outcomes["read"] += 1
    assert outcomes["refused"] > 200 and outcomes["read"] > 20  # both paths were exercised


@pytest.mark.parametrize("gz", [False, True])
def test_random_and_mutated_bytes_as_an_idx_file_raise_only_data_errors(tmp_path, write_idx, gz):
    rng = np.random.default_rng(2)
    path = tmp_path / ("fuzz.gz" if gz else "fuzz")
    valid = write_idx(path, rng.integers(0, 256, (3, 4, 4), dtype=np.uint8)).read_bytes()
    outcomes = {"read": 0, "refused": 0}
    for trial in range(400):
        data = bytearray(valid)
        if trial % 3 == 0:
            data = data[: rng.integers(0, len(data))]
        elif trial % 3 == 1:
            for at in rng.integers(0, len(data), rng.integers(1, 4)):
                data[at] = rng.integers(0, 256)
        else:
            data = bytearray(rng.bytes(int(rng.integers(0, 100))))
            if gz:
                data = bytearray(gzip.compress(bytes(data)))
        path.write_bytes(bytes(data))
        for magic in (IMAGES_MAGIC, LABELS_MAGIC):
            try:
                read_idx(path, magic)
                outcomes["read"] += 1
            except DataError as err:
                assert path.name in str(err)
                outcomes["refused"] += 1
    assert outcomes["refused"] > 300 and outcomes["read"] > 0


def write_folder(root, per_class: int, broken: bytes | None = None):
    for name, colour in (("cat", (200, 0, 0)), ("dog", (0, 0, 200))):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            Image.new("RGB", (6, 6), colour).save(root / name / f"{i}.png")
    if broken is not None:
        (root / "dog" / "broken.png").write_bytes(broken)


@pytest.mark.parametrize("per_class", [1, 2])
def test_folder_too_small_to_split_says_how_many_images_each_class_needs(tmp_path, per_class, capsys):
    write_folder(tmp_path, per_class)
    with pytest.raises(DataError, match=r"folder: .* split empty; give every class at least 3 images"):
        load_dataset("folder", tmp_path, image_size=4)
    assert main(["data", "info", "folder", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "at least 3 images" in err


def test_folder_of_three_per_class_has_one_of_each_class_in_every_split(tmp_path):
    write_folder(tmp_path, 3)
    splits = load_dataset("folder", tmp_path, image_size=4)
    for part in (splits.train, splits.val, splits.test):
        assert part.labels.tolist() == [0, 1]


@pytest.mark.parametrize("broken", [b"", b"GIF89a but not really", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"])
def test_folder_reader_refuses_a_broken_file_by_name(tmp_path, broken):
    write_folder(tmp_path, 3, broken)
    with pytest.raises(DataError, match=r"dog/broken.png: unreadable image"):
        load_dataset("folder", tmp_path, image_size=4)
