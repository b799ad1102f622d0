"""Images to tokens in NumPy: patchify, sequence length, linear and convolutional patch embedding.

Images are NHWC ``(B, H, W, C)``; each patch is flattened row, column, channel and patches follow
raster order, so token ``r * (W/P) + c`` is the patch at grid row ``r``, column ``c``.
"""

from __future__ import annotations

import numpy as np


def patchify(images: np.ndarray, patch_size: int) -> np.ndarray:
    """Images ``(B, H, W, C)`` -> flattened patches ``(B, GH*GW, P*P*C)`` by reshape and transpose."""
    b, height, width, channels = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"image {height}x{width} is not divisible by patch_size={patch_size}: "
            f"crop or pad it, or choose a patch that divides both sides"
        )
    gh, gw = height // patch_size, width // patch_size
    x = images.reshape(b, gh, patch_size, gw, patch_size, channels)
    x = x.transpose(0, 1, 3, 2, 4, 5)
    return x.reshape(b, gh * gw, patch_size * patch_size * channels)


def sequence_length(height: int, width: int, patch_size: int, class_token: bool = False) -> int:
    """Tokens the encoder sees: ``(H/P) * (W/P)`` patches, plus one for a class token."""
    return (height // patch_size) * (width // patch_size) + int(class_token)


def linear_patch_embedding(patches: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """``(B, N, P*P*C) @ (P*P*C, D) + (D,)`` -> tokens ``(B, N, D)``."""
    return patches @ weight + bias


def conv2d_strided(images: np.ndarray, kernel: np.ndarray, bias: np.ndarray, stride: int) -> np.ndarray:
    """The naive NHWC convolution: images ``(B, H, W, C)``, kernel ``(P, P, C, D)`` -> ``(B, H/s, W/s, D)``.

    One window per output position, contracted with the kernel over rows, columns and channels.
    """
    b, height, width, _ = images.shape
    patch = kernel.shape[0]
    gh, gw = (height - patch) // stride + 1, (width - patch) // stride + 1
    out = np.empty((b, gh, gw, kernel.shape[-1]), dtype=np.result_type(images, kernel))
    for r in range(gh):
        for c in range(gw):
            window = images[:, r * stride : r * stride + patch, c * stride : c * stride + patch, :]
            out[:, r, c, :] = np.tensordot(window, kernel, axes=([1, 2, 3], [0, 1, 2])) + bias
    return out
