"""``data.decode=gpu``: JPEGs decoded a batch at a time on the run's device, then cropped, resized there.

A streamed split's loader workers stop short of the pixels: each sends a JPEG's bytes and, for training, the
crop it drew on the CPU (:meth:`~vitlab.data.preprocess.Preprocess.train_box`, the very function the CPU path
crops with, from the image's header and the same per-image seed) as an :class:`Encoded`. The main process
decodes the batch in one ``torchvision.io.decode_jpeg(list, device=...)`` call and makes each image the model's
uint8 input through the same :class:`~vitlab.data.preprocess.Preprocess` (:meth:`~Preprocess.resized_crop` or
:meth:`~Preprocess.eval_image` on a tensor: torchvision's antialiased kernels where the CPU path has PIL's
filters, so the two agree to interpolation tolerance, not bit for bit). Normalisation stays where it always is,
in the training step. On a CPU device the same code runs with torchvision's CPU kernels.

Any other image (PNG, a CMYK JPEG, ...) is decoded and cropped in its worker as on the CPU path and travels
as pixels; an image the device cannot decode is reported as unreadable, as the CPU path reports it.
"""

from __future__ import annotations

import re
import warnings
from typing import NamedTuple

import torch
from torchvision.io import ImageReadMode, decode_jpeg

from .preprocess import Box, Preprocess


class Encoded(NamedTuple):
    """One JPEG as a worker sends it: its bytes ``(n,)`` uint8, the training crop drawn for it (None:
    evaluation's resize and centre crop, computed from the decoded size) and its name for messages."""

    data: torch.Tensor
    box: Box | None
    name: str


def decode_batch(
    items: list[torch.Tensor | Encoded], preprocess: Preprocess, device: torch.device
) -> tuple[torch.Tensor, list[int], list[tuple[str, str]]]:
    """``(images uint8 (B', C, H, W) on device, positions kept, [(name, why) of the unreadable ones])``.

    ``items``: a worker's pixels uint8 ``(C, H, W)`` (an image decoded on the CPU) or an :class:`Encoded` JPEG,
    decoded here in one call and then cropped and resized by ``preprocess``."""
    jpegs = [item for item in items if isinstance(item, Encoded)]
    decoded = iter(_decode(jpegs, preprocess.channels, device))
    out: list[torch.Tensor] = []
    keep: list[int] = []
    bad: list[tuple[str, str]] = []
    for k, item in enumerate(items):
        if isinstance(item, Encoded):
            pixels = next(decoded)
            if isinstance(pixels, str):
                bad.append((item.name, pixels))
                continue
            pixels = preprocess.eval_image(pixels) if item.box is None else preprocess.resized_crop(pixels, item.box)
        else:
            pixels = item.to(device, non_blocking=True)
        out.append(pixels)
        keep.append(k)
    if not out:
        empty = torch.empty((0, preprocess.channels, *preprocess.image_size), dtype=torch.uint8, device=device)
        return empty, keep, bad
    return torch.stack(out), keep, bad


def _decode(jpegs: list[Encoded], channels: int, device: torch.device) -> list[torch.Tensor | str]:
    """Each JPEG decoded on ``device`` (uint8 ``(channels, h, w)``), or why it cannot be: one call for the
    batch, one per image only when that call fails (to find which)."""
    if not jpegs:
        return []
    mode = ImageReadMode.RGB if channels == 3 else ImageReadMode.GRAY
    try:
        return list(_decode_jpeg([j.data for j in jpegs], mode, device))
    except RuntimeError:
        pass
    out: list[torch.Tensor | str] = []
    for jpeg in jpegs:
        try:
            out.append(_decode_jpeg([jpeg.data], mode, device)[0])
        except RuntimeError as err:
            why = re.sub(r"^decode_jpeg, \S+:\d+, ", "", str(err).strip())
            out.append(f"{jpeg.name}: unreadable image (RuntimeError: {why}); fix or remove the file")
    return out


def _decode_jpeg(data: list[torch.Tensor], mode: ImageReadMode, device: torch.device) -> list[torch.Tensor]:
    """``torchvision.io.decode_jpeg`` of a list, without the deprecation warning torchvision 0.29 gives every
    call (its successor, TorchCodec, is not a dependency of vitlab)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The image decoding and encoding capabilities", DeprecationWarning)
        return decode_jpeg(data, mode=mode, device=device)
