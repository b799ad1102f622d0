"""Shifted Patch Tokenization (SPT; Lee, Lee & Song 2021, "Vision Transformer for Small-Size Datasets").

A plain patch embedding sees each patch alone. SPT widens every token's receptive field: it
concatenates the image with four copies translated diagonally by half a patch, so each patch
also carries the pixels of its neighbours' nearer halves::

    images (B, C, H, W)
      -> [x, x(i-s, j-s), x(i-s, j+s), x(i+s, j-s), x(i+s, j+s)]   (B, 5C, H, W), s = P // 2, zero fill
      -> patchify                                                   (B, N, P*P*5C)
      -> LayerNorm -> Linear                                        (B, N, D)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..ops.patches import patchify
from .patch_embed import PatchTokenizer


def diagonal_shifts(images: torch.Tensor, shift: int) -> torch.Tensor:
    """The image and its four diagonal translations by ``shift`` pixels, on channels.

    ``(B, C, H, W) -> (B, 5C, H, W)``: channel block ``k`` holds ``x(i - a_k, j - b_k)`` for
    ``(a, b) = (0, 0), (s, s), (s, -s), (-s, s), (-s, -s)`` (content moved down-right, down-left,
    up-right, up-left), with zeros where the translation leaves the image.
    """
    h, w = images.shape[-2:]
    s = shift
    padded = F.pad(images, (s, s, s, s))
    windows = [(s, s), (0, 0), (0, 2 * s), (2 * s, 0), (2 * s, 2 * s)]  # top-left corners in padded
    return torch.cat([padded[..., r : r + h, c : c + w] for r, c in windows], dim=1)


class ShiftedPatchTokenization(PatchTokenizer):
    """Images ``(B, C, H, W)`` -> patch tokens ``(B, N, D)`` in raster order, by SPT.

    Parameters: LayerNorm ``2 * 5P²C`` and Linear ``5P²C * D + D`` (16,234 for P=7, C=1, D=64,
    against 3,200 for the plain patch embedding).

    Args:
        patch_size: side ``P`` of the square patch.
        in_chans: channels ``C`` the model expects.
        embed_dim: token width ``D``.
        shift: translation in pixels; ``None`` takes half a patch, ``P // 2`` (the paper's).
        pad: zero-pad images whose sides are not multiples of ``P``.
    """

    def __init__(
        self,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        shift: int | None = None,
        pad: bool = False,
        norm_eps: float = 1e-6,
    ) -> None:
        super().__init__(patch_size, in_chans, embed_dim, pad)
        shift = patch_size // 2 if shift is None else shift
        if not 0 < shift < patch_size:
            raise ConfigError(
                f"shift {shift} must be between 1 and patch_size - 1 = {patch_size - 1}: "
                f"leave it None for half a patch ({patch_size // 2})"
            )
        self.shift = shift
        width = 5 * in_chans * patch_size * patch_size
        self.norm = nn.LayerNorm(width, eps=norm_eps)
        self.proj = nn.Linear(width, embed_dim)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.check_images(images)
        tokens = patchify(diagonal_shifts(images, self.shift), self.patch_size, pad=self.pad)
        return self.proj(self.norm(tokens))

    def extra_repr(self) -> str:
        return f"patch_size={self.patch_size}, shift={self.shift}, pad={self.pad}"
