"""One door for image files: :func:`read_image` decodes a PNG/JPEG/BMP/GIF/WebP/PPM file or refuses it.

The folder dataset and ``vitlab predict`` read images through it, so every unreadable file (missing, a
folder, empty, text, truncated, corrupt, or a decompression bomb) ends the same way: a
:class:`~vitlab.errors.DataError` naming the file. The pixel count is checked from the header before
any pixel is decoded.
"""

from __future__ import annotations

import struct
import warnings
import zlib
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from ..errors import DataError

IMAGE_FORMATS = ("PNG", "JPEG", "BMP", "GIF", "WEBP", "PPM")
MAX_PIXELS = 1 << 26
"""The largest image read by default: 67 megapixels (8192 x 8192)."""
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


def read_image(
    path: str | Path, channels: int = 3, size: int | None = None, max_pixels: int = MAX_PIXELS
) -> torch.Tensor:
    """Image file -> ``(channels, H, W)`` float32 in [0, 1]; ``size``: resize (bilinear) to ``size x size``.

    ``channels`` is 3 (RGB) or 1 (greyscale). Raises :class:`DataError` naming the file when it cannot be
    read as an image or holds more than ``max_pixels`` pixels.
    """
    if channels not in (1, 3) or (size is not None and size < 1):
        raise DataError(f"read_image needs channels 1 or 3 and size >= 1, got {channels} and {size}")
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: {'is a folder, not an image file' if path.is_dir() else 'no such file'}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path, formats=IMAGE_FORMATS) as opened:
                if opened.width * opened.height > max_pixels:
                    raise DataError(
                        f"{path}: {opened.width}x{opened.height} pixels is over the limit of "
                        f"{max_pixels:,}; shrink the image first"
                    )
                image = opened.convert("RGB" if channels == 3 else "L")
                if size is not None:
                    image = image.resize((size, size), Image.Resampling.BILINEAR)
    except _DECODE_ERRORS as err:
        raise DataError(f"{path}: unreadable image ({type(err).__name__}: {err}); fix or remove the file") from err
    pixels = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255)
    return pixels[None] if channels == 1 else pixels.permute(2, 0, 1).contiguous()
