"""Masked autoencoder (He et al. 2022) around a vitlab :class:`~vitlab.models.VisionTransformer`.

images (B, C, H, W)
  -> encoder.forward_features(keep)         (B, R + K, D): the prefix tokens and K = round(N (1 - ratio))
                                            random patch tokens, each at its own position (rotary too)
  -> decoder_embed                          (B, R + K, Dd)
  -> append N - K mask tokens, unshuffle    (B, R + N, Dd), + fixed 2-D sinusoidal positions
  -> decoder blocks, norm, pred             (B, N, P*P*C) pixel predictions
loss = mean over masked patches of the per-patch MSE to patchify(images)
       (optionally per-patch normalised targets)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from ...checks import Bool, Check, Float, Int, check_fields
from ...errors import ConfigError
from ...layers.block import Block
from ...models.config import MAX_DEPTH, MAX_HEADS, MAX_WIDTH, check_params, transformer_block_params
from ...models.vit import VisionTransformer
from ...ops.patches import patchify
from ...ops.positions import sincos_2d
from .masking import Masking, gather_tokens, random_masking


@dataclass
class MAEConfig:
    """The decoder and the objective; the encoder is any vitlab ViT without rotary positions."""

    mask_ratio: float = 0.75
    decoder_dim: int = 64
    decoder_depth: int = 2
    decoder_heads: int = 4
    mlp_ratio: float = 2.0
    norm_pix_loss: bool = False

    checks: ClassVar[dict[str, Check]] = {
        "mask_ratio": Float(0, 1, low_open=True, high_open=True),
        "decoder_dim": Int(1, MAX_WIDTH),
        "decoder_depth": Int(1, MAX_DEPTH),
        "decoder_heads": Int(1, MAX_HEADS),
        "mlp_ratio": Float(0, 64, low_open=True),
        "norm_pix_loss": Bool(),
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        if self.decoder_dim % 4 or self.decoder_dim % self.decoder_heads:
            raise ConfigError(
                f"decoder_dim {self.decoder_dim} must be a multiple of 4 (2-D sine positions) and of "
                f"decoder_heads {self.decoder_heads}: choose e.g. decoder_dim=64, decoder_heads=4"
            )
        hidden = int(self.decoder_dim * self.mlp_ratio)
        if hidden < 1:
            raise ConfigError(
                f"mlp_ratio {self.mlp_ratio} gives an MLP of int({self.decoder_dim} * {self.mlp_ratio}) "
                f"= 0 units: raise mlp_ratio"
            )
        check_params(
            self,
            self.decoder_depth * transformer_block_params(self.decoder_dim, hidden),
            "decoder_dim or decoder_depth",
        )


def mae_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, norm_pix: bool = False) -> torch.Tensor:
    """Mean squared error over hidden patches only.

    ``pred``, ``target`` ``(B, N, P*P*C)``; ``mask (B, N)`` 1 where hidden. With ``norm_pix`` each
    target patch is standardised by its own mean and variance first.
    """
    if norm_pix:
        mean, var = target.mean(dim=-1, keepdim=True), target.var(dim=-1, keepdim=True)
        target = (target - mean) / (var + 1e-6).sqrt()
    per_patch = (pred - target).pow(2).mean(dim=-1)
    return (per_patch * mask).sum() / mask.sum()


class MaskedAutoencoder(nn.Module):
    """``encoder`` (a VisionTransformer, trained in place) plus a light transformer decoder."""

    decoder_pos: torch.Tensor

    def __init__(self, encoder: VisionTransformer, config: MAEConfig | None = None) -> None:
        super().__init__()
        cfg = config or MAEConfig()
        encoder.check_keep()
        self.encoder, self.config = encoder, cfg
        enc = encoder.config
        self.patch_size, self.grid = enc.patch_size, enc.grid
        self.decoder_embed = nn.Linear(enc.embed_dim, cfg.decoder_dim)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, cfg.decoder_dim))
        self.register_buffer("decoder_pos", sincos_2d(self.grid, cfg.decoder_dim)[None], persistent=False)
        self.decoder_blocks = nn.ModuleList(
            [Block(cfg.decoder_dim, cfg.decoder_heads, cfg.mlp_ratio) for _ in range(cfg.decoder_depth)]
        )
        self.decoder_norm = nn.LayerNorm(cfg.decoder_dim, eps=1e-6)
        self.decoder_pred = nn.Linear(cfg.decoder_dim, enc.patch_size**2 * enc.in_chans)
        nn.init.normal_(self.mask_token, std=0.02)
        for m in [self.decoder_embed, self.decoder_pred, *self.decoder_blocks.modules()]:
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def no_weight_decay(self) -> set[str]:
        return {f"encoder.{n}" for n in self.encoder.no_weight_decay()} | {"mask_token"}

    def encode(self, images: torch.Tensor, masking: Masking) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> encoded prefix + visible tokens ``(B, R + K, D)``."""
        return self.encoder.forward_features(images, keep=masking.keep)

    def decode(self, latent: torch.Tensor, masking: Masking) -> torch.Tensor:
        """Encoded ``(B, R + K, D)`` -> pixel predictions for every patch ``(B, N, P*P*C)``."""
        r = self.encoder.num_prefix_tokens
        x = self.decoder_embed(latent)
        b, n = masking.restore.shape
        hidden = self.mask_token.expand(b, n - masking.num_keep, -1)
        patches = gather_tokens(torch.cat([x[:, r:], hidden], dim=1), masking.restore) + self.decoder_pos
        x = torch.cat([x[:, :r], patches], dim=1)
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, r:]

    def forward(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``images (B, C, H, W)`` -> ``(loss, pred (B, N, P*P*C), mask (B, N))``; masks drawn from ``generator``."""
        n = self.grid[0] * self.grid[1]
        masking = random_masking(images.shape[0], n, self.config.mask_ratio, images.device, generator)
        pred = self.decode(self.encode(images, masking), masking)
        target = patchify(images, self.patch_size)
        return mae_loss(pred, target, masking.mask, self.config.norm_pix_loss), pred, masking.mask
