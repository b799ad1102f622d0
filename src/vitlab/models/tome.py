"""Token merging on a trained ViT: ``apply_tome(model, r)`` (see :mod:`vitlab.layers.tome`).

    fast = apply_tome(model, r=8)      # shares model's parameters; model itself is unchanged
    fast(images)                       # logits (B, num_classes), r tokens fewer after every block
    apply_tome(model, front_loaded(8, len(model.blocks)))    # as many merges, more of them early

No retraining: the blocks run with their own weights, proportional attention accounts for
merged tokens, and mean pooling weighs each token by how many patches it stands for (which is
the plain mean over patches when tokens are averages of them).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..errors import ConfigError
from ..layers.tome import TokenMerging, check_mergeable
from .vit import VisionTransformer


class TokenMergingViT(nn.Module):
    """A :class:`VisionTransformer` whose blocks merge ``r`` tokens each after attention (or ``r[i]`` in
    block ``i``: a schedule, e.g. front-loaded to merge redundant background early).

    ``model`` is held, not copied: its parameters, device and train/eval mode are this module's.
    """

    def __init__(self, model: VisionTransformer, r: int | Sequence[int]) -> None:
        super().__init__()
        if not isinstance(model, VisionTransformer):
            raise ConfigError(
                f"token merging applies to a vitlab VisionTransformer, got {type(model).__name__}: "
                f"convert timm models with vitlab.interop.from_timm first"
            )
        schedule = [r] * len(model.blocks) if isinstance(r, (int, float)) else list(r)
        if len(schedule) != len(model.blocks) or any(int(v) != v or v < 0 for v in schedule):
            raise ConfigError(
                f"r (tokens merged per block) must be a non-negative integer or one per block "
                f"({len(model.blocks)}), got {r!r}"
            )
        if model.rope is not None:
            raise ConfigError(
                "token merging averages tokens from different places, which rotary positions (applied "
                "inside every block) cannot follow: use a model with additive positions"
            )
        for block in model.blocks:
            check_mergeable(block)
        self.model, self.r = model, tuple(int(v) for v in schedule)

    def forward_features(
        self, images: torch.Tensor, readout: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Images ``(B, C, H, W)`` -> merged tokens ``(B, R + N', D)`` after the final norm, and their sizes
        ``(B, R + N', 1)`` (``None`` when nothing was merged). ``readout = n``: the last block computes
        the first ``n`` tokens only, as in :meth:`VisionTransformer.forward_features`."""
        merging = TokenMerging(self.r, self.model.num_prefix_tokens)
        tokens = self.model.forward_features(images, readout, block_fn=merging)
        return tokens, merging.size

    def forward(self, images: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Images ``(B, C, H, W)`` -> logits ``(B, num_classes)``: the model's heads on the merged tokens,
        a mean pool weighted by the tokens' sizes (the class-token readout as in :meth:`VisionTransformer.forward`)."""
        tokens, size = self.forward_features(images, readout=self.model.readout)
        return self.model.forward_head(tokens, size=size)

    def extra_repr(self) -> str:
        return f"r={self.r}"


def front_loaded(r: int, depth: int) -> list[int]:
    """A schedule merging about ``r * depth`` tokens in all, decreasing linearly from the first block:
    ``r_i = round(2 r (depth - i) / (depth + 1))``. Early blocks hold the most redundant tokens
    (background), and tokens removed early save work in every later block, so at the same total
    it is faster than a constant ``r`` and, on the benchmark's MNIST ViT, more faithful too."""
    if r < 0 or depth < 1:
        raise ConfigError(f"need r >= 0 and depth >= 1, got r={r}, depth={depth}")
    return [round(2 * r * (depth - i) / (depth + 1)) for i in range(depth)]


def apply_tome(model: VisionTransformer, r: int | Sequence[int]) -> TokenMergingViT:
    """``model`` with ``r`` tokens merged per block (ToMe; or ``r[i]`` in block ``i``), sharing its weights;
    ``r = 0`` is ``model``'s own function. A block merges at most half of its non-prefix tokens. Raises
    ``ValueError`` for models it cannot rewrite (rotary positions, post-norm blocks, attention other
    than ``"full"``)."""
    return TokenMergingViT(model, r)
