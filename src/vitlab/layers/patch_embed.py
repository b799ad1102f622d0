"""Patch embedding: a linear map on flattened patches, computed as a stride-P convolution.

The two are one function. A ``Conv2d(C, D, kernel_size=P, stride=P)`` with weight ``w`` of
shape ``(D, C, P, P)`` equals ``patchify(x) @ W.T + b`` with the linear weight

    W = w.permute(0, 2, 3, 1).reshape(D, P*P*C)     # (D, P*P*C): row, column, channel

because :func:`vitlab.patchify` flattens each patch row, column, channel. The module keeps the
convolution's parameters (``proj.weight``, ``proj.bias``) and can run either way.

With a ``stride`` below ``P`` the windows overlap (an overlapping tokenizer): the grid is
``floor((H - P) / S) + 1`` per side (:func:`~vitlab.ops.patches.strided_grid`), not ``H / P``, so
the token count is not ``H W / P^2`` -- the miscount the texts warn of.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import CheckpointError, ConfigError, DataError
from ..ops.patches import check_divisible, overlapping_patches, pad_to_multiple, patchify, strided_grid


def conv_weight_to_linear(weight: torch.Tensor) -> torch.Tensor:
    """``(D, C, P, P)`` convolution kernel -> ``(D, P*P*C)`` linear weight on patchified tokens."""
    d = weight.shape[0]
    return weight.permute(0, 2, 3, 1).reshape(d, -1)


def linear_weight_to_conv(weight: torch.Tensor, patch_size: int, in_chans: int) -> torch.Tensor:
    """``(D, P*P*C)`` linear weight -> ``(D, C, P, P)`` convolution kernel (inverse of the above)."""
    d = weight.shape[0]
    if weight.shape[1] != patch_size * patch_size * in_chans:
        raise CheckpointError(
            f"linear weight has {weight.shape[1]} inputs, expected "
            f"P*P*C = {patch_size}*{patch_size}*{in_chans} = {patch_size**2 * in_chans}"
        )
    return weight.reshape(d, patch_size, patch_size, in_chans).permute(0, 3, 1, 2)


class PatchTokenizer(nn.Module):
    """What every image-to-patch-token module shares: its sizes, the patch grid, and the input check.
    Subclasses (:class:`PatchEmbedding`, :class:`~vitlab.layers.ShiftedPatchTokenization`) map
    images ``(B, C, H, W)`` to tokens ``(B, N, D)``."""

    def __init__(self, patch_size: int, in_chans: int, embed_dim: int, pad: bool, stride: int | None = None) -> None:
        super().__init__()
        self.patch_size, self.in_chans, self.embed_dim, self.pad = patch_size, in_chans, embed_dim, pad
        self.stride = patch_size if stride is None else stride

    def grid_size(self, height: int, width: int) -> tuple[int, int]:
        """The patch grid ``(H/P, W/P)`` for an image of that size (rounded up when padding; the
        :func:`~vitlab.ops.patches.strided_grid` with a stride that is not the patch size)."""
        if self.stride != self.patch_size:
            return strided_grid(height, width, self.patch_size, self.stride)
        if self.pad:
            return -(-height // self.patch_size), -(-width // self.patch_size)
        return check_divisible(height, width, self.patch_size)

    def check_images(self, images: torch.Tensor) -> None:
        """A clear error for anything but a batch ``(B, C, H, W)`` with the model's channel count."""
        if images.ndim != 4 or images.shape[1] != self.in_chans:
            raise DataError(
                f"expected images (B, {self.in_chans}, H, W), got shape {tuple(images.shape)}: "
                + (
                    f"convert them to the model's channel count or build the model with in_chans={images.shape[1]}"
                    if images.ndim == 4
                    else "add a batch axis"
                )
            )


class PatchEmbedding(PatchTokenizer):
    """Images ``(B, C, H, W)`` -> patch tokens ``(B, N, D)`` in raster order.

    Args:
        patch_size: side ``P`` of the square patch.
        in_chans: channels ``C`` the model expects.
        embed_dim: token width ``D``.
        method: ``"conv"`` (a stride-P convolution, the fast path) or ``"linear"``
            (``patchify`` then a matrix product); both use the same parameters.
        pad: zero-pad images whose sides are not multiples of ``P``.
        stride: pixels between windows (default ``P``: tiling patches); below ``P`` they overlap.
    """

    def __init__(
        self,
        patch_size: int = 16,
        in_chans: int = 3,
        embed_dim: int = 768,
        method: str = "conv",
        pad: bool = False,
        bias: bool = True,
        stride: int | None = None,
    ) -> None:
        super().__init__(patch_size, in_chans, embed_dim, pad, stride)
        if method not in ("conv", "linear"):
            raise ConfigError(f"patch embedding method must be 'conv' or 'linear', got {method!r}")
        if pad and self.stride != patch_size:
            raise ConfigError(f"pad=True tiles the image in whole patches, so it cannot take stride {stride}")
        self.method = method
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=self.stride, bias=bias)

    def linear_weight(self) -> torch.Tensor:
        """The projection as a ``(D, P*P*C)`` matrix on patchified tokens."""
        return conv_weight_to_linear(self.proj.weight)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.check_images(images)
        if self.method == "linear":
            tokens = (
                patchify(images, self.patch_size, pad=self.pad)
                if self.stride == self.patch_size
                else overlapping_patches(images, self.patch_size, self.stride)
            )
            return F.linear(tokens, self.linear_weight(), self.proj.bias)
        self.grid_size(*images.shape[-2:])  # clear error before the convolution
        if self.pad:
            images = pad_to_multiple(images, self.patch_size)
        return self.proj(images).flatten(2).transpose(1, 2)
