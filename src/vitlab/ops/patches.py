"""Images to patch tokens and back: pure tensor functions.

A patch is flattened row by row, column by column, channel last, and patches follow raster
order (left to right, then top to bottom), exactly as the textbook's NumPy listing does::

    images (B, C, H, W)  torch     ->  tokens (B, N, P*P*C),  N = (H/P) * (W/P)
    images (B, H, W, C)  NumPy     ->  tokens (B, N, P*P*C)

Both functions are reshapes and transposes only, so ``unpatchify(patchify(x))`` is exact.
"""

from __future__ import annotations

import math
import numbers
from typing import overload

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import ConfigError, DataError

Array = torch.Tensor | np.ndarray


def _pair(value: int | tuple[int, int], name: str) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int) else tuple(value)
    if len(pair) != 2 or any(int(v) != v or v < 1 for v in pair):
        raise ConfigError(f"{name} must be a positive int or a pair of them, got {value!r}")
    return int(pair[0]), int(pair[1])


def check_patch_size(patch_size: int) -> None:
    """Raise :class:`ConfigError` unless ``patch_size`` is a positive integer."""
    if isinstance(patch_size, bool) or not isinstance(patch_size, numbers.Integral) or patch_size < 1:
        raise ConfigError(f"patch_size must be a positive integer, got {patch_size!r}")


def divisibility_error(height: int, width: int, patch_size: int) -> ConfigError:
    """The error for an image whose sides are not multiples of the patch size."""
    common = math.gcd(height, width)
    divisors = [p for p in range(2, min(common, 32) + 1) if common % p == 0]
    hint = f" (patches dividing {height}x{width}: {', '.join(map(str, divisors))})" if divisors else ""
    return ConfigError(
        f"image {height}x{width} is not divisible by patch {patch_size}: crop it, "
        f"pad it (pad=True zero-pads bottom and right to "
        f"{-(-height // patch_size) * patch_size}x{-(-width // patch_size) * patch_size}), "
        f"or choose a patch that divides it{hint}"
    )


def check_divisible(height: int, width: int, patch_size: int) -> tuple[int, int]:
    """Return the patch grid ``(H/P, W/P)`` or raise the error that names the way out."""
    check_patch_size(patch_size)
    if height % patch_size or width % patch_size:
        raise divisibility_error(height, width, patch_size)
    return height // patch_size, width // patch_size


def num_tokens(height: int, width: int, patch_size: int, class_token: bool = False, pad: bool = False) -> int:
    """Sequence length of an ``height x width`` image cut into ``patch_size`` patches.

    ``224, 224, 16 -> 196`` (197 with ``class_token=True``). With ``pad=True`` a partial patch
    at the bottom or right counts as a whole one (the image is zero-padded).
    """
    check_patch_size(patch_size)
    if pad:
        gh, gw = -(-height // patch_size), -(-width // patch_size)
    else:
        gh, gw = check_divisible(height, width, patch_size)
    return gh * gw + int(class_token)


@overload
def pad_to_multiple(images: torch.Tensor, patch_size: int) -> torch.Tensor: ...
@overload
def pad_to_multiple(images: np.ndarray, patch_size: int) -> np.ndarray: ...
def pad_to_multiple(images: Array, patch_size: int) -> Array:
    """Zero-pad the bottom and right edges so both sides are multiples of ``patch_size``.

    torch ``(B, C, H, W)`` or NumPy ``(B, H, W, C)``; returns the same layout and type.
    """
    check_patch_size(patch_size)
    height, width = images.shape[-2:] if isinstance(images, torch.Tensor) else images.shape[1:3]
    pad_h, pad_w = (-height) % patch_size, (-width) % patch_size
    if pad_h == 0 and pad_w == 0:
        return images
    if isinstance(images, torch.Tensor):
        return F.pad(images, (0, pad_w, 0, pad_h))
    return np.pad(images, ((0, 0), (0, pad_h), (0, pad_w), (0, 0)))


@overload
def patchify(images: torch.Tensor, patch_size: int, pad: bool = False) -> torch.Tensor: ...
@overload
def patchify(images: np.ndarray, patch_size: int, pad: bool = False) -> np.ndarray: ...
def patchify(images: Array, patch_size: int, pad: bool = False) -> Array:
    """Cut images into flattened patches.

    Args:
        images: torch ``(B, C, H, W)`` or NumPy ``(B, H, W, C)``.
        patch_size: side ``P`` of the square patch.
        pad: zero-pad bottom and right to a multiple of ``P`` instead of raising.

    Returns:
        ``(B, N, P*P*C)`` of the input's type; token ``n = r * (W/P) + c`` is the patch at grid
        row ``r``, column ``c``; inside it, index ``(i * P + j) * C + k`` is pixel ``(i, j)``,
        channel ``k``.
    """
    if images.ndim != 4:
        layout = "(B, C, H, W)" if isinstance(images, torch.Tensor) else "(B, H, W, C)"
        raise DataError(
            f"patchify expects a batch of images {layout}, got shape "
            f"{tuple(images.shape)}; add a batch axis with images[None]"
        )
    if pad:
        images = pad_to_multiple(images, patch_size)
    if isinstance(images, torch.Tensor):
        b, c, h, w = images.shape
        gh, gw = check_divisible(h, w, patch_size)
        x = images.reshape(b, c, gh, patch_size, gw, patch_size)
        return x.permute(0, 2, 4, 3, 5, 1).reshape(b, gh * gw, patch_size * patch_size * c)
    b, h, w, c = images.shape
    gh, gw = check_divisible(h, w, patch_size)
    grid = images.reshape(b, gh, patch_size, gw, patch_size, c)
    return grid.transpose(0, 1, 3, 2, 4, 5).reshape(b, gh * gw, patch_size * patch_size * c)


@overload
def unpatchify(tokens: torch.Tensor, patch_size: int, grid: int | tuple[int, int]) -> torch.Tensor: ...
@overload
def unpatchify(tokens: np.ndarray, patch_size: int, grid: int | tuple[int, int]) -> np.ndarray: ...
def unpatchify(tokens: Array, patch_size: int, grid: int | tuple[int, int]) -> Array:
    """Invert :func:`patchify` exactly.

    Args:
        tokens: ``(B, N, P*P*C)`` with ``N = gh * gw``.
        grid: ``(gh, gw)``, the patch grid (an int for a square grid).

    Returns:
        torch ``(B, C, gh*P, gw*P)`` or NumPy ``(B, gh*P, gw*P, C)``.
    """
    check_patch_size(patch_size)
    gh, gw = _pair(grid, "grid")
    b, n, d = tokens.shape
    if n != gh * gw:
        raise ConfigError(
            f"{n} tokens do not fill a {gh}x{gw} grid ({gh * gw} tokens); pass the grid the tokens came from"
        )
    if d % (patch_size * patch_size):
        raise ConfigError(
            f"token width {d} is not a multiple of P*P = {patch_size**2}: "
            f"is patch_size={patch_size} the one used to patchify?"
        )
    c = d // (patch_size * patch_size)
    if isinstance(tokens, torch.Tensor):
        x = tokens.reshape(b, gh, gw, patch_size, patch_size, c)
        return x.permute(0, 5, 1, 3, 2, 4).reshape(b, c, gh * patch_size, gw * patch_size)
    patches = tokens.reshape(b, gh, gw, patch_size, patch_size, c)
    return patches.transpose(0, 1, 3, 2, 4, 5).reshape(b, gh * patch_size, gw * patch_size, c)


def strided_grid(height: int, width: int, patch_size: int, stride: int) -> tuple[int, int]:
    """The token grid of ``patch_size`` windows taken every ``stride`` pixels (overlapping when ``stride <
    patch_size``): ``(floor((H - P) / S) + 1, floor((W - P) / S) + 1)``. Only ``stride == patch_size`` tiles
    the image, where the count is ``H W / P^2``; raises when the image is smaller than one window."""
    check_patch_size(patch_size)
    check_patch_size(stride)
    if height < patch_size or width < patch_size:
        raise ConfigError(f"image {height}x{width} is smaller than one {patch_size}x{patch_size} patch")
    return (height - patch_size) // stride + 1, (width - patch_size) // stride + 1


def overlapping_patches(images: torch.Tensor, patch_size: int, stride: int) -> torch.Tensor:
    """Flattened ``P x P`` windows every ``stride`` pixels: ``(B, C, H, W) -> (B, N, P*P*C)``, raster order
    over the :func:`strided_grid`, each window flattened as :func:`patchify` flattens a patch (row, column,
    channel). Pixels past the last whole window are not read. With ``stride == patch_size`` on an image the
    patch divides, this is :func:`patchify`."""
    b, c, h, w = images.shape
    strided_grid(h, w, patch_size, stride)
    windows = F.unfold(images, patch_size, stride=stride)  # (B, C*P*P, N): channel, row, column
    return windows.reshape(b, c, patch_size * patch_size, -1).permute(0, 3, 2, 1).reshape(b, -1, patch_size**2 * c)
