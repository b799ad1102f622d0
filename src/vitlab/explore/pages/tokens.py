"""Tokens page: an image cut into patches, as it is or as a model reads it.

What the model reads of an image: inverted or padded on request, resized, normalised, and how far
that is from its training images.

- :func:`pad_to_aspect`, :func:`prepared`: the image as the model should read it (inverted, padded to
  its aspect), each variant named apart so it is analysed and cached apart.
- :func:`domain_note`, :func:`input_view`: the steps that made the model's input, the input itself,
  and a note when its statistics are far from the training images'.
"""

from __future__ import annotations

from typing import Any

import torch
from fastapi import APIRouter

from ...data import ImageDataset
from ..arrays import encode_array
from ..images import LabeledImage, RequestError, model_image, model_images
from ..loaded import Analysis, LoadedModel
from . import Context
from .cost import tokens_view

OOD_MEAN = 0.75
OOD_STD = (0.5, 2.0)
REFERENCE_IMAGES = 64  # held-out images whose normalised statistics stand for the training images'
PHOTO_MEAN, PHOTO_STD = 0.449, 0.226  # pixel mean and std of natural photos in [0, 1] (ImageNet's, over channels)


def reference_statistics(entry: LoadedModel, data: ImageDataset | None) -> tuple[float, float, str]:
    """The mean and std of the normalised input of ``entry``'s training images, and where they come from: measured
    on the first :data:`REFERENCE_IMAGES` of ``data`` (its own held-out images, read as it reads them) when given,
    else those of natural photos (:data:`PHOTO_MEAN`, :data:`PHOTO_STD`) normalised by the model's mean and std."""
    if data is not None and len(data):
        inputs = entry.statistics.normalize(model_images(data.images[:REFERENCE_IMAGES], entry.preprocess))
        return float(inputs.mean()), float(inputs.std()), f"its {data_words(entry)}"
    mean = sum((PHOTO_MEAN - m) / s for m, s in zip(entry.mean, entry.std)) / len(entry.mean)
    std = sum(PHOTO_STD / s for s in entry.std) / len(entry.std)
    return mean, std, "photos in general"


def data_words(entry: LoadedModel) -> str:
    return f"{entry.dataset} images" if entry.dataset else "training images"


def pad_to_aspect(image: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``image (1, C, h, w)`` padded (centred) to the aspect of ``size (H, W)``, the padding filled
    per channel with the mean of the image's border, so it reads as background."""
    _, c, h, w = image.shape
    height, width = (h, -(-h * size[1] // size[0])) if h * size[1] >= w * size[0] else (-(-w * size[0] // size[1]), w)
    if (height, width) == (h, w):
        return image
    border = torch.cat([image[..., 0, :], image[..., -1, :], image[..., :, 0], image[..., :, -1]], -1).mean(-1)
    out = border[:, :, None, None].expand(1, c, height, width).clone()
    top, left = (height - h) // 2, (width - w) // 2
    out[..., top : top + h, left : left + w] = image
    return out


def prepared(
    picture: LabeledImage, entry: LoadedModel, invert: bool = False, keep_aspect: bool = False
) -> LabeledImage:
    """``picture`` as the model should read it: inverted (``1 - x``) and/or padded to the model's aspect
    (:func:`pad_to_aspect`, so the resize that follows does not stretch it). The reference names the
    options, so each variant is analysed, and cached, apart."""
    if not (invert or keep_aspect):
        return picture
    image = 1 - picture.image if invert else picture.image
    if keep_aspect:
        image = pad_to_aspect(image, entry.image_size)
    tags = [tag for tag, on in (("invert", invert), ("keep-aspect", keep_aspect)) if on]
    return LabeledImage(f"{picture.ref}|{'|'.join(tags)}", image, picture.label)


def domain_note(
    entry: LoadedModel,
    image: torch.Tensor,
    seen: tuple[float, float],
    reference: tuple[float, float, str],
    inverted: bool = False,
) -> str | None:
    """A sentence when the normalised input's mean and std (``seen``) are far from the training images'
    (``reference``: mean, std and where they come from, :func:`reference_statistics`), else ``None``.
    ``image (1, C, H, W)`` is the fitted image in [0, 1], already inverted when ``inverted``: if its inverse would
    be nearer, the note says to invert it (or, when it is inverted already, to undo that)."""
    (mean, std), (ref_mean, ref_std, where) = seen, reference
    far = abs(mean - ref_mean) > OOD_MEAN * ref_std
    if not far and OOD_STD[0] * ref_std <= std <= OOD_STD[1] * ref_std:
        return None
    note = (
        f"This input is far from the images the model was trained on: its normalised mean is {mean:+.2f} and "
        f"its std {std:.2f}, where those of {where} are about {ref_mean:+.2f} and {ref_std:.2f}. Read the "
        f"prediction with care."
    )
    inverse = float(entry.statistics.normalize(1 - image).mean())
    if abs(inverse - ref_mean) < abs(mean - ref_mean) and far:
        if inverted:
            note += (
                f" Not inverted, its mean would be {inverse:+.2f}: the image was likely right as it was "
                f"(untick 'invert the image')."
            )
        else:
            note += (
                f" Inverted, its mean would be {inverse:+.2f}: its light and dark are likely swapped from the "
                f"training images' (try 'invert the image')."
            )
    return note


def resize_words(entry: LoadedModel, h: int, w: int, keep_aspect: bool) -> str | None:
    """How the model's own pipeline (:attr:`LoadedModel.preprocess`) takes an ``h x w`` picture to its input size,
    in words; ``None`` when it already has that size."""
    pre = entry.preprocess
    size = pre.image_size
    if (h, w) == tuple(size):
        return None
    target = f"{size[0]}×{size[1]}"
    scale = "×".join(map(str, pre.scale_size))
    if pre.crop_mode == "squash":
        same_aspect = h * size[1] == w * size[0]
        stretched = "" if keep_aspect or same_aspect else " (stretched: 'keep the aspect ratio' pads it instead)"
        padded = (
            "padded to the model's aspect with the border's colour, then " if keep_aspect and not same_aspect else ""
        )
        crop = f", centre-cropped to {target}" if pre.crop_pct != 1 else ""
        return f"{padded}resized ({pre.interpolation}) from {h}×{w} to {scale}{crop}{stretched}"
    side = "shorter" if pre.crop_mode == "center" else "longer"
    return (
        f"resized ({pre.interpolation}) from {h}×{w}, aspect kept, its {side} side to {max(pre.scale_size)}, then "
        f"centre-{'cropped' if pre.crop_mode == 'center' else 'cropped or padded'} to {target}, as the model was "
        f"trained to read a picture"
    )


def input_view(
    entry: LoadedModel,
    analysis: Analysis,
    original: torch.Tensor,
    reference: tuple[float, float, str],
    invert: bool = False,
    keep_aspect: bool = False,
) -> dict[str, Any]:
    """What the model sees of ``original (1, C, h, w)``: the steps that made its input, the normalised
    input ``(C, H, W)`` and its range, the input's mean and std, the training images' (``reference``), and
    :func:`domain_note`."""
    _, c, h, w = original.shape
    steps = ["inverted: x becomes 1 − x"] if invert else []
    if c != entry.channels:
        steps.append(
            "colour to grey by luma (0.299 R + 0.587 G + 0.114 B)"
            if entry.channels == 1
            else "grey repeated into 3 channels"
        )
    resized = resize_words(entry, h, w, keep_aspect)
    if resized is not None:
        steps.append(resized)
    mean_words = ", ".join(f"{m:.3f}" for m in entry.mean)
    std_words = ", ".join(f"{s:.3f}" for s in entry.std)
    steps.append(f"normalised: (x − mean) / std with the model's recorded mean {mean_words} and std {std_words}")
    inputs = analysis.inputs[0]
    mean, std = float(inputs.mean()), float(inputs.std())
    return {
        "input": encode_array(inputs),
        "range": [float(inputs.min()), float(inputs.max())],
        "channels_words": "greyscale" if entry.channels == 1 else "RGB",
        "steps": steps,
        "mean": mean,
        "std": std,
        "reference": {"mean": reference[0], "std": reference[1], "of": reference[2]},
        "out_of_domain": domain_note(entry, analysis.image, (mean, std), reference, invert),
    }


def router(ctx: Context) -> APIRouter:
    api = APIRouter()

    @api.get("/api/tokens")
    def tokens(ref: str, patch: int | None = None, model: int | None = None) -> dict[str, Any]:
        """The image's tokens at ``patch``; with ``model``, the image the model reads (its channels and
        size) cut at the model's patch size."""
        picture = ctx.book.get(ref)
        if model is None:
            if patch is None:
                raise RequestError("give a patch size (patch=P) or a model whose reading to show (model=INDEX)")
            return {**picture.describe(), "read_by": None, **tokens_view(picture.image, patch)}
        entry = ctx.shelf.get(model)
        if entry.patch_size is None:
            raise RequestError(f"{entry.name} reads no patches (it is a convolutional network): choose a ViT")
        image = model_image(picture, entry.preprocess)
        read_by = {
            "model": entry.index,
            "name": entry.name,
            "size": list(entry.image_size),
            "channels": entry.channels,
            "patch": entry.patch_size,
            "original": [picture.image.shape[-2], picture.image.shape[-1], picture.image.shape[1]],
        }
        return {**picture.describe(), "read_by": read_by, **tokens_view(image, entry.patch_size)}

    return api
