"""What the model reads of an image: inverted or padded on request, resized, normalised, and how far
that is from its training images.

- :func:`pad_to_aspect`, :func:`prepared`: the image as the model should read it (inverted, padded to
  its aspect), each variant named apart so it is analysed and cached apart.
- :func:`domain_note`, :func:`input_view`: the steps that made the model's input, the input itself,
  and a note when its statistics are far from the training images'.
"""

from __future__ import annotations

from typing import Any

import torch

from ..data import normalize
from .arrays import encode_array
from .images import LabeledImage
from .loaded import Analysis, LoadedModel

# The normalised input of a training image has mean about 0 and std about 1; one whose mean is
# further than OOD_MEAN from 0, or whose std is outside OOD_STD, is far from what the model learned on.
OOD_MEAN = 0.75
OOD_STD = (0.5, 2.0)


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


def domain_note(entry: LoadedModel, image: torch.Tensor, mean: float, std: float, inverted: bool = False) -> str | None:
    """A sentence when the normalised input's ``mean`` and ``std`` are far from the training images'
    (about 0 and 1; see :data:`OOD_MEAN`, :data:`OOD_STD`), else ``None``. ``image (1, C, H, W)`` is the
    fitted image in [0, 1], already inverted when ``inverted``: if its inverse would be nearer, the note
    says to invert it (or, when it is inverted already, to undo that)."""
    if abs(mean) <= OOD_MEAN and OOD_STD[0] <= std <= OOD_STD[1]:
        return None
    note = (
        f"This input is far from the images the model was trained on: its normalised mean is {mean:+.2f} and "
        f"its std {std:.2f}, where theirs are about 0 and 1. Read the prediction with care."
    )
    inverse = float(normalize(1 - image, entry.mean, entry.std).mean())
    if abs(inverse) < abs(mean) and abs(mean) > OOD_MEAN:
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


def input_view(
    entry: LoadedModel, analysis: Analysis, original: torch.Tensor, invert: bool = False, keep_aspect: bool = False
) -> dict[str, Any]:
    """What the model sees of ``original (1, C, h, w)``: the steps that made its input, the normalised
    input ``(C, H, W)`` and its range, the input's mean and std, and :func:`domain_note`."""
    _, c, h, w = original.shape
    size = entry.image_size
    steps = ["inverted: x becomes 1 − x"] if invert else []
    if c != entry.channels:
        steps.append(
            "colour to grey by luma (0.299 R + 0.587 G + 0.114 B)"
            if entry.channels == 1
            else "grey repeated into 3 channels"
        )
    if (h, w) != tuple(size):
        same_aspect = h * size[1] == w * size[0]
        how = (
            "padded to the model's aspect with the border's colour, then resized"
            if keep_aspect and not same_aspect
            else "resized"
        )
        stretched = "" if keep_aspect or same_aspect else " (stretched: 'keep the aspect ratio' pads it instead)"
        steps.append(f"{how} from {h}×{w} to {size[0]}×{size[1]}{stretched}")
    mean_words = ", ".join(f"{m:.3f}" for m in entry.mean)
    std_words = ", ".join(f"{s:.3f}" for s in entry.std)
    steps.append(f"normalised: (x − mean) / std with the training images' mean {mean_words} and std {std_words}")
    inputs = analysis.inputs[0]
    mean, std = float(inputs.mean()), float(inputs.std())
    return {
        "input": encode_array(inputs),
        "range": [float(inputs.min()), float(inputs.max())],
        "channels_words": "greyscale" if entry.channels == 1 else "RGB",
        "steps": steps,
        "mean": mean,
        "std": std,
        "out_of_domain": domain_note(entry, analysis.image, mean, std, invert),
    }
