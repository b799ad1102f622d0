"""One door for image files: :func:`decode_image` decodes a PNG/JPEG/BMP/GIF/WebP/PPM file (or its bytes)
into a PIL image or refuses it; :func:`read_image` makes that a float tensor.

Every dataset of photos and ``vitlab predict`` read images through it, so every unreadable file (missing, a
folder, empty, text, truncated, corrupt, or a decompression bomb) ends the same way: a
:class:`~vitlab.errors.DataError` naming the file. The pixel count is checked from the header before
any pixel is decoded.

Modes that PIL's ``convert("RGB")`` / ``convert("L")`` would get wrong are normalised on the way out:
16-bit greyscale (``I;16``, ``I``) is scaled 65535 -> 255 (PIL clips it at 255), ``F`` is rounded (PIL
truncates), palette images with
transparency and ``PA`` become ``RGBA`` (their colours, not a warning), CMYK becomes RGB. Any other mode
is returned as decoded, so ``decode_image(f).convert("RGB")`` is what ``Image.open(f).convert("RGB")``
gives for every 8-bit file (timm's and torchvision's loaders).

:func:`image_channels`, :func:`convert_image` and :func:`image_tensor` are the rest of the door, shared by
``vitlab predict`` (:func:`read_image`) and the explorer's uploads.
"""

from __future__ import annotations

import io
import re
import struct
import warnings
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..errors import DataError
from .preprocess import Preprocess, unit_pixels

IMAGE_FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP", "PPM")
MAX_PIXELS = 1 << 26
"""The largest image read by default: 67 megapixels (8192 x 8192)."""
MAX_ASPECT = 256
"""The longest side of an image read is at most this many times its shortest: resizing a 60,000,000 x 1
image's shorter side to 224 would make a side of 13 billion pixels."""
_DECODE_ERRORS = (
    OSError,
    ValueError,
    SyntaxError,
    EOFError,
    IndexError,
    TypeError,
    KeyError,
    struct.error,
    zlib.error,
    Image.DecompressionBombError,
    Image.DecompressionBombWarning,
)


_SIXTEEN_BIT = ("I;16", "I;16L", "I;16B", "I;16N", "I")


def decode_image(
    source: str | Path | bytes, name: str | None = None, max_pixels: int = MAX_PIXELS, normalise: bool = True
) -> Image.Image:
    """A file (path) or its ``bytes`` -> the decoded PIL image, in a mode that ``convert`` maps correctly.

    ``name`` is what errors call the image (default: the path). Raises :class:`DataError` naming it when it
    cannot be read as an image, holds more than ``max_pixels`` pixels or has one side over :data:`MAX_ASPECT`
    times the other (both checked from the header, before any pixel is decoded). See the module docstring for
    the modes normalised; ``normalise=False`` returns
    the mode as decoded (a label mask, whose values are ids, not intensities).
    """
    opener, label = _opener(source, name)
    with _reading(label, max_pixels), Image.open(opener, formats=IMAGE_FORMATS) as opened:
        _check_size(opened, label, max_pixels)
        opened.load()
        return _normalise_mode(opened) if normalise else opened


def jpeg_bytes(
    source: str | Path | bytes, name: str | None = None, max_pixels: int = MAX_PIXELS
) -> tuple[bytes, int, int] | None:
    """``(the file's bytes, height, width)`` of an 8-bit RGB or greyscale JPEG, read from its header without
    decoding a pixel (what ``torchvision.io.decode_jpeg`` decodes as PIL does), or None for any other image
    (decode it with :func:`decode_image`). The same :class:`DataError` as :func:`decode_image` for a file that
    is missing, not an image, or over the limits."""
    opener, label = _opener(source, name)
    with _reading(label, max_pixels):
        data = opener.getvalue() if isinstance(opener, io.BytesIO) else opener.read_bytes()
        with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as opened:
            _check_size(opened, label, max_pixels)
            if opened.format != "JPEG" or opened.mode not in ("RGB", "L"):
                return None
            return data, opened.height, opened.width


def _opener(source: str | Path | bytes, name: str | None) -> tuple[io.BytesIO | Path, str]:
    """What PIL opens for ``source`` and what errors call it; :class:`DataError` for a missing file or a folder."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return io.BytesIO(source), name or "image bytes"
    path = Path(source)
    label = name or str(path)
    if not path.is_file():
        raise DataError(f"{label}: {'is a folder, not an image file' if path.is_dir() else 'no such file'}")
    return path, label


def _check_size(opened: Image.Image, label: str, max_pixels: int) -> None:
    """:class:`DataError` for an image (header read) over ``max_pixels`` or :data:`MAX_ASPECT`."""
    if opened.width * opened.height > max_pixels:
        raise DataError(
            f"{label}: {opened.width}x{opened.height} pixels is over the limit of {max_pixels:,}; "
            "shrink the image first"
        )
    if max(opened.size) > MAX_ASPECT * max(1, min(opened.size)):
        raise DataError(
            f"{label}: {opened.width}x{opened.height} pixels is over the aspect-ratio limit of "
            f"{MAX_ASPECT}:1; crop the image first"
        )


@contextmanager
def _reading(label: str, max_pixels: int) -> Iterator[None]:
    """Every error of reading image ``label`` as one :class:`DataError` naming it (PIL's own pixel-count check
    as over ``max_pixels``); its decompression-bomb warning is an error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            yield
    except DataError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:  # PIL's own check came first
        found = re.search(r"\((\d+) pixels\)", str(err))
        pixels = f"{int(found.group(1)):,} pixels" if found else "its pixel count"
        raise DataError(f"{label}: {pixels} is over the limit of {max_pixels:,}; shrink the image first") from err
    except _DECODE_ERRORS as err:
        raise DataError(f"{label}: unreadable image ({type(err).__name__}: {err}); fix or remove the file") from err


def _normalise_mode(image: Image.Image) -> Image.Image:
    """16-bit grey -> ``L`` scaled by 255/65535; ``F`` -> ``L`` rounded (PIL's 0-255 scale); palette with
    transparency, ``PA`` -> ``RGBA``; CMYK -> RGB. Any other image unchanged (so this is idempotent)."""
    if image.mode in _SIXTEEN_BIT:
        pixels = np.asarray(image, dtype=np.float64).clip(0, 65535) * (255 / 65535)
        return Image.fromarray(np.rint(pixels).astype(np.uint8), "L")
    if image.mode == "F":  # PIL's own F -> L truncates; NaN is black
        pixels = np.nan_to_num(np.asarray(image, dtype=np.float64), nan=0.0).clip(0, 255)
        return Image.fromarray(np.rint(pixels).astype(np.uint8), "L")
    if image.mode == "PA" or (image.mode == "P" and "transparency" in image.info):
        return image.convert("RGBA")
    if image.mode == "CMYK":
        return image.convert("RGB")
    return image


GREY_MODES = ("1", "L", "LA", "La", "F", *_SIXTEEN_BIT)
"""The modes of a greyscale image: :func:`image_channels` reads them as one channel."""


def image_channels(image: Image.Image) -> int:
    """1 for a greyscale image (a mode in :data:`GREY_MODES`), else 3: the channels an image shows as it is."""
    return 1 if image.mode in GREY_MODES else 3


def convert_image(image: Image.Image, channels: int, name: str = "the image") -> Image.Image:
    """A decoded image as ``RGB`` (``channels`` 3) or ``L`` (1), the one way every reader does it: 16-bit grey
    scaled 65535 -> 255 and ``F`` rounded to 8 bits, a palette's transparency and CMYK converted (see
    :func:`decode_image`), alpha dropped (LA, RGBA: their colours as stored, as timm's loader reads them).
    :class:`DataError` naming ``name`` when the mode cannot be converted."""
    if channels not in (1, 3):
        raise DataError(f"{name}: channels must be 1 or 3, got {channels}")
    try:
        return _normalise_mode(image).convert("RGB" if channels == 3 else "L")
    except _DECODE_ERRORS as err:
        raise DataError(f"{name}: image mode {image.mode} cannot be converted ({err}); save it as RGB") from err


def image_tensor(
    image: Image.Image, channels: int = 3, size: int | None = None, name: str = "the image"
) -> torch.Tensor:
    """A decoded image -> ``(channels, H, W)`` float32 in [0, 1] (:func:`convert_image`, then ``x / 255``);
    ``size``: resized (bilinear) to ``size x size`` first."""
    if size is not None and size < 1:
        raise DataError(f"{name}: size must be >= 1, got {size}")
    image = convert_image(image, channels, name)
    side = (image.height, image.width) if size is None else (size, size)
    return unit_pixels(Preprocess(image_size=side, channels=channels).eval_image(image))


def read_image(
    source: str | Path | bytes,
    channels: int = 3,
    size: int | None = None,
    max_pixels: int = MAX_PIXELS,
    name: str | None = None,
) -> torch.Tensor:
    """An image file (path) or its ``bytes`` -> ``(channels, H, W)`` float32 in [0, 1]; ``size``: resize
    (bilinear) to ``size x size``. The door is :func:`decode_image`, :func:`convert_image`, :func:`image_tensor`.

    ``channels`` is 3 (RGB) or 1 (greyscale). Raises :class:`DataError` naming the file (or ``name``) when it
    cannot be read as an image or holds more than ``max_pixels`` pixels.
    """
    if channels not in (1, 3) or (size is not None and size < 1):
        raise DataError(f"read_image needs channels 1 or 3 and size >= 1, got {channels} and {size}")
    label = name or ("image bytes" if isinstance(source, (bytes, bytearray, memoryview)) else str(source))
    return image_tensor(decode_image(source, name, max_pixels=max_pixels), channels, size, label)
