"""Random masking of patch tokens (MAE): keep ``round(N * (1 - ratio))`` tokens per image.

Each image draws ``N`` uniform noises; the tokens with the smallest noise are kept. ``shuffle`` is
the argsort of the noise (kept tokens first), ``restore`` its inverse, so gathering by ``restore``
puts a shuffled sequence back into raster order exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ...errors import ConfigError


def num_visible(num_tokens: int, ratio: float) -> int:
    """Tokens kept out of ``num_tokens`` at mask ``ratio``: ``round(N * (1 - ratio))``."""
    if not 0.0 <= ratio < 1.0:
        raise ConfigError(f"mask ratio must lie in [0, 1), got {ratio}: MAE uses 0.75")
    keep = round(num_tokens * (1.0 - ratio))
    if keep < 1:
        raise ConfigError(f"mask ratio {ratio} keeps no token of {num_tokens}: lower the ratio")
    return keep


@dataclass
class Masking:
    """One draw of random masks for a batch.

    ``shuffle (B, N)``: token indices, the ``K`` kept ones first; ``restore (B, N)``: its inverse
    permutation; ``mask (B, N)``: 1.0 where a token is hidden, 0.0 where visible (raster order).
    """

    shuffle: torch.Tensor
    restore: torch.Tensor
    mask: torch.Tensor
    num_keep: int

    @property
    def keep(self) -> torch.Tensor:
        """Indices of the visible tokens, ``(B, K)``."""
        return self.shuffle[:, : self.num_keep]


def random_masking(
    batch: int,
    num_tokens: int,
    ratio: float,
    device: torch.device | str = "cpu",
    generator: torch.Generator | None = None,
) -> Masking:
    """Draw a :class:`Masking` for ``batch`` images of ``num_tokens`` tokens (seeded by ``generator``)."""
    keep = num_visible(num_tokens, ratio)
    noise = torch.rand(batch, num_tokens, generator=generator, device=generator.device if generator else "cpu")
    shuffle = noise.argsort(dim=1).to(device)
    restore = shuffle.argsort(dim=1)
    mask = torch.ones(batch, num_tokens, device=device)
    mask[:, :keep] = 0.0
    return Masking(shuffle, restore, mask.gather(1, restore), keep)


def gather_tokens(tokens: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``tokens (B, N, D)`` at ``index (B, M)`` -> ``(B, M, D)``."""
    return tokens.gather(1, index[..., None].expand(-1, -1, tokens.shape[-1]))
