"""The explorer decodes an upload through the CLI's image door: for every mode and size of image, in every format
PIL writes, the tensor it shows is the one ``read_image`` reads (its channels: greyscale modes one), and what the
CLI refuses or the explorer does not take is refused in one line."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from vitlab.data.image import IMAGE_FORMATS, convert_image, image_channels, image_tensor, read_image
from vitlab.errors import DataError
from vitlab.explore.images import UPLOAD_FORMATS, RequestError, decode_upload

MODES = ("L", "LA", "P", "P+transparency", "RGB", "RGBA", "CMYK", "I;16", "I", "F")
FORMATS = ("PNG", "TIFF", "WEBP", "JPEG")


def random_image(mode: str, size: tuple[int, int], rng: np.random.Generator) -> Image.Image:
    """A ``mode`` image of ``size`` (width, height) with random pixels over the mode's whole range."""
    w, h = size
    if mode in ("I;16", "I"):
        image = Image.fromarray(rng.integers(0, 65536, (h, w), dtype=np.uint16))
        return image if mode == "I;16" else image.convert("I")
    if mode == "F":
        return Image.fromarray(rng.uniform(-10, 265, (h, w)).astype(np.float32), "F")
    if mode.startswith("P"):
        image = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB").quantize(16)
        if mode == "P+transparency":
            image.info["transparency"] = int(rng.integers(0, 16))
        return image
    bands = len(Image.new(mode, (1, 1)).getbands())
    pixels = rng.integers(0, 256, (h, w, bands), dtype=np.uint8)
    return Image.frombytes(mode, size, pixels.tobytes())


def encoded(image: Image.Image, fmt: str) -> bytes | None:
    """``image`` as a ``fmt`` file, or None where PIL cannot write that mode in that format."""
    buffer = io.BytesIO()
    extra = {"transparency": image.info["transparency"]} if "transparency" in image.info else {}
    try:
        image.save(buffer, fmt, **extra)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return buffer.getvalue()


def cases(seed: int = 0) -> list[tuple[str, str, tuple[int, int], int]]:
    rng = np.random.default_rng(seed)
    return [
        (mode, fmt, (int(rng.integers(1, 40)), int(rng.integers(1, 40))), int(rng.integers(1 << 30)))
        for mode in MODES
        for fmt in FORMATS
        for _ in range(2)
    ]


@pytest.mark.parametrize(("mode", "fmt", "size", "seed"), cases())
def test_an_upload_decodes_to_exactly_what_the_cli_reads(mode, fmt, size, seed):
    data = encoded(random_image(mode, size, np.random.default_rng(seed)), fmt)
    if data is None:
        pytest.skip(f"PIL writes no {mode} {fmt}")
    stored = Image.open(io.BytesIO(data))
    if fmt not in UPLOAD_FORMATS:  # the explorer takes PNG and JPEG only, in one line naming them
        with pytest.raises(RequestError, match=r"not a readable PNG or JPEG image .*export it as \.png or \.jpg") as e:
            decode_upload(data)
        assert e.value.status == 415 and "\n" not in str(e.value)
        if fmt not in IMAGE_FORMATS:
            with pytest.raises(DataError, match="image bytes: unreadable image"):
                read_image(data)
        return
    shown = decode_upload(data)
    channels = image_channels(stored)
    cli = read_image(data, channels=channels)
    assert cli.shape == (channels, size[1], size[0]) and cli.dtype == torch.float32
    if shown.shape[1] == 1 and channels == 3:  # a grey picture saved as RGB is shown as one channel
        assert torch.equal(cli[0], cli[1]) and torch.equal(cli[0], cli[2])
        cli = cli[:1]
    assert torch.equal(shown[0], cli), (mode, fmt, stored.mode)


@pytest.mark.parametrize("value", [0, 1, 128, 257, 32767, 32768, 40000, 65534, 65535])
@pytest.mark.parametrize("fmt", ["PNG"])
def test_a_16_bit_upload_is_scaled_as_the_cli_scales_it_not_saturated(value, fmt):
    buffer = io.BytesIO()
    Image.fromarray(np.full((6, 9), value, np.uint16)).save(buffer, fmt)
    shown = decode_upload(buffer.getvalue())
    assert shown.shape == (1, 1, 6, 9)
    assert torch.equal(shown[0], read_image(buffer.getvalue(), channels=1))
    assert torch.all(shown == round(value / 257) / 255)
    if value == 32768:
        assert float(shown.mean()) == pytest.approx(0.5, abs=1 / 255)


@pytest.mark.parametrize("seed", range(4))
def test_float_images_are_rounded_on_pils_8_bit_scale(seed):
    pixels = np.random.default_rng(seed).uniform(-50, 300, (5, 7)).astype(np.float32)
    pixels[0, 0] = np.nan
    converted = np.asarray(convert_image(Image.fromarray(pixels, "F"), 1))
    expected = np.rint(np.nan_to_num(pixels.astype(np.float64), nan=0.0).clip(0, 255)).astype(np.uint8)
    np.testing.assert_array_equal(converted, expected)
    tensor = image_tensor(Image.fromarray(pixels, "F"), 1)
    assert torch.equal(tensor[0], torch.from_numpy(expected).float() / 255)


@pytest.mark.parametrize(
    "data", [b"", b"not an image", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40, b"\xff\xd8\xff\xe0" + b"\x13" * 64]
)
def test_bad_bytes_are_one_clear_line(data):
    with pytest.raises(RequestError) as raised:
        decode_upload(data)
    message = str(raised.value)
    assert raised.value.status == 415 and "\n" not in message and "PNG or JPEG" in message
    with pytest.raises(DataError, match=r"^image bytes: ") as cli:
        read_image(data) if data else read_image(b"\x00")
    assert "\n" not in str(cli.value)
