"""The Vision Transformer.

    images (B, C, H, W)
      -> PatchEmbedding            tokens (B, N, D), N = (H/P) * (W/P)
      -> + positions               (learned, sinusoidal, row+column; or rotary inside attention)
      -> [class token, registers]  (B, R + N, D)
      -> depth x Block             pre-norm transformer blocks
      -> norm -> pool              class token or mean over patch tokens -> (B, D)
      -> fc_norm -> head           logits (B, num_classes)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch
from torch import nn

from ..layers.attention import ATTENTION_KINDS
from ..layers.block import Block, PostNormBlock
from ..layers.patch_embed import PatchEmbedding
from ..layers.position import POSITION_KINDS, LearnedPosition, Rotary2d, SinCosPosition, build_position
from ..layers.shifted_patch import ShiftedPatchTokenization
from ..ops.patches import _pair
from .config import ModelConfig

POOLS = ("token", "mean", "max")
PATCH_EMBEDS = ("conv", "linear", "spt")


@dataclass
class ViTConfig(ModelConfig):
    """Everything that defines a :class:`VisionTransformer`.

    ``fc_norm=None`` follows timm: a LayerNorm after pooling for ``mean``/``max`` pooling, on
    every token before pooling for ``token`` pooling. ``fc_norm=False`` with ``pool="mean"``
    normalises every token, then averages (the textbook's Keras model).

    Small-data options (Lee, Lee & Song 2021): ``patch_embed="spt"`` tokenises by Shifted Patch
    Tokenization, ``attention="lsa"`` uses Locality Self-Attention in every block.

    Cheaper attention (``layers.attention`` lists the costs): ``attention="window"`` attends inside
    ``window_size`` x ``window_size`` windows of the patch grid, shifted by half a window in every
    odd block, and needs ``class_token=False, reg_tokens=0`` (prefix tokens have no place on the
    grid; pool by the mean); ``"linear"``; ``"lowrank"`` projects keys and values to ``lowrank_k``
    rows (a fixed image size); ``"latent"`` mixes through ``num_latents`` learned tokens. The
    options are read only by their kind, so they change nothing else (parameters, state-dict keys).
    """
    img_size: int | tuple[int, int] = 224
    patch_size: int = 16
    in_chans: int = 3
    num_classes: int = 1000
    embed_dim: int = 768
    depth: int = 12
    num_heads: int = 12
    mlp_ratio: float = 4.0
    qkv_bias: bool = True
    qk_norm: bool = False
    pos_embed: str = "learned"
    pool: str = "token"
    class_token: bool = True
    reg_tokens: int = 0
    pre_norm: bool = False
    final_norm: bool = True
    fc_norm: bool | None = None
    block: str = "prenorm"
    layer_scale: float | None = None
    patch_embed: str = "conv"
    attention: str = "full"
    window_size: int = 7
    lowrank_k: int = 64
    num_latents: int = 16
    pad: bool = False
    dynamic_img_size: bool = False
    norm_eps: float = 1e-6
    drop_rate: float = 0.0
    pos_drop_rate: float = 0.0
    attn_drop_rate: float = 0.0
    drop_path_rate: float = 0.0

    def __post_init__(self) -> None:
        self.img_size = _pair(self.img_size, "img_size")
        if self.pool not in POOLS:
            raise ValueError(f"pool must be one of {POOLS}, got {self.pool!r}")
        if self.pool == "token" and not self.class_token:
            raise ValueError("pool='token' reads the class token, but class_token=False: "
                             "set class_token=True or pool='mean'")
        if self.pos_embed not in POSITION_KINDS:
            raise ValueError(f"pos_embed must be one of {POSITION_KINDS}, got {self.pos_embed!r}")
        if self.patch_embed not in PATCH_EMBEDS:
            raise ValueError(f"patch_embed must be one of {PATCH_EMBEDS}, got {self.patch_embed!r}")
        if self.attention not in ATTENTION_KINDS:
            raise ValueError(f"attention must be one of {ATTENTION_KINDS}, got {self.attention!r}")
        for name in ("window_size", "lowrank_k", "num_latents"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)}")
        if self.attention == "window" and self.num_prefix_tokens:
            raise ValueError("attention='window' partitions the patch grid, where a class or register token has no "
                             "place: set class_token=False, reg_tokens=0 and pool='mean'")
        if self.attention == "lowrank" and self.dynamic_img_size:
            raise ValueError("attention='lowrank' projects a fixed number of tokens, so it cannot take "
                             "dynamic_img_size=True: fix the image size or choose another attention")
        if self.block not in ("prenorm", "postnorm"):
            raise ValueError(f"block must be 'prenorm' or 'postnorm', got {self.block!r}")
        if self.embed_dim % self.num_heads:
            raise ValueError(f"embed_dim {self.embed_dim} is not divisible by num_heads {self.num_heads}: "
                             f"choose a head count that divides it")

    @property
    def grid(self) -> tuple[int, int]:
        h, w = self.img_size
        p = self.patch_size
        return (-(-h // p), -(-w // p)) if self.pad else (h // p, w // p)

    @property
    def num_prefix_tokens(self) -> int:
        return int(self.class_token) + self.reg_tokens



def init_linears(model: nn.Module) -> None:
    """timm's initialisation of every linear layer in ``model``: truncated normal (std 0.02), zero bias."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


class VisionTransformer(nn.Module):
    """A ViT classifier: images ``(B, C, H, W)`` -> logits ``(B, num_classes)``.

    ``forward_features`` returns all tokens after the final norm, ``(B, R + N, D)`` with the
    ``R`` prefix tokens (class token, registers) first; ``forward_head`` pools and classifies.
    """

    def __init__(self, config: ViTConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        cfg = config or ViTConfig()
        if overrides:
            cfg = ViTConfig.from_dict({**cfg.to_dict(), **overrides})
        self.config = cfg
        dim = cfg.embed_dim
        self.num_prefix_tokens = cfg.num_prefix_tokens
        self.patch_embed = (
            ShiftedPatchTokenization(cfg.patch_size, cfg.in_chans, dim, pad=cfg.pad, norm_eps=cfg.norm_eps)
            if cfg.patch_embed == "spt" else
            PatchEmbedding(cfg.patch_size, cfg.in_chans, dim, method=cfg.patch_embed, pad=cfg.pad))
        self.pos_embed = build_position(cfg.pos_embed, cfg.grid, dim)
        self.rope = (Rotary2d(cfg.grid, dim // cfg.num_heads, cfg.num_prefix_tokens)
                     if cfg.pos_embed == "rope" else None)
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim)) if cfg.class_token else None
        self.reg_token = nn.Parameter(torch.zeros(1, cfg.reg_tokens, dim)) if cfg.reg_tokens else None
        self.pos_drop = nn.Dropout(cfg.pos_drop_rate) if cfg.pos_drop_rate > 0 else nn.Identity()
        self.norm_pre = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.pre_norm else nn.Identity()
        block = PostNormBlock if cfg.block == "postnorm" else Block
        rates = torch.linspace(0, cfg.drop_path_rate, cfg.depth).tolist()
        options = dict(grid=cfg.grid, num_tokens=cfg.num_prefix_tokens + cfg.grid[0] * cfg.grid[1],
                       window_size=cfg.window_size, lowrank_k=cfg.lowrank_k, num_latents=cfg.num_latents)
        self.blocks = nn.ModuleList([
            block(dim, cfg.num_heads, cfg.mlp_ratio, qkv_bias=cfg.qkv_bias, qk_norm=cfg.qk_norm,
                  dropout=cfg.drop_rate, attn_drop=cfg.attn_drop_rate, drop_path=rate,
                  layer_scale=cfg.layer_scale, norm_eps=cfg.norm_eps, attention=cfg.attention,
                  attention_options={**options, "shift": i % 2 == 1})
            for i, rate in enumerate(rates)])
        use_fc_norm = cfg.pool in ("mean", "max") if cfg.fc_norm is None else cfg.fc_norm
        self.norm = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.final_norm and not use_fc_norm else nn.Identity()
        self.fc_norm = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.final_norm and use_fc_norm else nn.Identity()
        self.head_drop = nn.Dropout(cfg.drop_rate) if cfg.drop_rate > 0 else nn.Identity()
        self.head = nn.Linear(dim, cfg.num_classes) if cfg.num_classes > 0 else nn.Identity()
        self._init_weights()

    def _init_weights(self) -> None:
        """timm's ViT initialisation: :func:`init_linears`, and near-zero special tokens."""
        init_linears(self)
        for token in (self.class_token, self.reg_token):
            if token is not None:
                nn.init.normal_(token, std=1e-6)

    @property
    def embed_dim(self) -> int:
        return self.config.embed_dim

    @property
    def num_classes(self) -> int:
        return self.config.num_classes

    def grid_size(self, height: int, width: int) -> tuple[int, int]:
        """The patch grid for an image ``height x width``; raises a clear error if it cannot run."""
        if (height, width) != self.config.img_size and not self.config.dynamic_img_size:
            h, w = self.config.img_size
            raise ValueError(f"image {height}x{width} differs from the model's img_size {h}x{w}: resize it, "
                             f"build the model with img_size=({height}, {width}) (model.set_image_size "
                             f"resamples learned positions), or with dynamic_img_size=True")
        return self.patch_embed.grid_size(height, width)

    def set_image_size(self, img_size: int | tuple[int, int]) -> None:
        """Run at a new image size from now on: a learned position table is resampled bicubically,
        a sinusoidal one recomputed."""
        size = _pair(img_size, "img_size")
        grid = self.patch_embed.grid_size(*size)
        if isinstance(self.pos_embed, (LearnedPosition, SinCosPosition)):
            self.pos_embed.resample_(grid)
        self.config.img_size = size
        self.pos_embed.grid = grid
        if self.rope is not None:
            self.rope = Rotary2d(grid, self.rope.head_dim, self.rope.num_prefix).to(self.rope.sin.device)

    def prefix_tokens(self, batch: int) -> list[torch.Tensor]:
        """The class token and register tokens, each expanded to the batch: ``(B, 1|R, D)``."""
        return [t.expand(batch, -1, -1) for t in (self.class_token, self.reg_token) if t is not None]

    def embed(self, images: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int]]:
        """Patch tokens with positions and prefix tokens: ``(B, R + N, D)``, and the grid."""
        grid = self.grid_size(*images.shape[-2:])
        x = self.pos_embed(self.patch_embed(images), grid)
        x = torch.cat(self.prefix_tokens(x.shape[0]) + [x], dim=1)
        return self.norm_pre(self.pos_drop(x)), grid

    def forward_features(self, images: torch.Tensor, readout: int | None = None) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> encoded tokens ``(B, R + N, D)`` after the final norm; with
        ``readout = n`` the last block computes the first ``n`` tokens only: ``(B, n, D)``."""
        x, grid = self.embed(images)
        rope = self.rope(grid) if self.rope is not None else None
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks):
            x = block(x, rope, grid, readout if i == last else None)
        return self.norm(x)

    def forward_intermediates(self, images: torch.Tensor, indices: Sequence[int]) -> list[torch.Tensor]:
        """Patch tokens after the blocks ``indices`` (0-based; ``-1`` is the last), as feature maps.

        Images ``(B, C, H, W)`` -> a list, in the order of ``indices``, of ``(B, D, H/P, W/P)`` maps;
        prefix tokens are dropped, the last block's output gets the final norm.
        """
        depth = len(self.blocks)
        wanted = [i % depth if -depth <= i < depth else None for i in indices]
        if None in wanted:
            raise ValueError(f"block indices {list(indices)} out of range for depth {depth}: "
                             f"use 0..{depth - 1} or negative indices")
        x, grid = self.embed(images)
        rope = self.rope(grid) if self.rope is not None else None
        maps = {}
        for i, block in enumerate(self.blocks[:max(wanted) + 1]):
            x = block(x, rope, grid)
            if i in wanted:
                tokens = self.norm(x) if i == depth - 1 else x
                maps[i] = tokens[:, self.num_prefix_tokens:].transpose(1, 2).reshape(x.shape[0], -1, *grid)
        return [maps[i] for i in wanted]

    def pool(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(B, R + N, D) -> (B, D)``: the class token, or the mean / max over patch tokens."""
        if self.config.pool == "token":
            return tokens[:, 0]
        patches = tokens[:, self.num_prefix_tokens:]
        return patches.mean(dim=1) if self.config.pool == "mean" else patches.amax(dim=1)

    def forward_head(self, tokens: torch.Tensor, pre_logits: bool = False) -> torch.Tensor:
        """Encoded tokens ``(B, R + N, D)`` -> logits ``(B, num_classes)`` (or pooled ``(B, D)``)."""
        x = self.head_drop(self.fc_norm(self.pool(tokens)))
        return x if pre_logits else self.head(x)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, C, H, W)`` -> logits ``(B, num_classes)``. The head reads the class token alone
        under ``pool="token"``, so the last block computes only that token's output (its attention
        still reads every token): the logits of ``forward_head(forward_features(images))`` for about
        one block's MLP and projections less work -- as nanoGPT's inference reads the last position only."""
        return self.forward_head(self.forward_features(images, readout=1 if self.config.pool == "token" else None))

    def reset_classifier(self, num_classes: int, pool: str | None = None) -> None:
        """Replace the head with a fresh one for ``num_classes`` (0 removes it), optionally re-pool."""
        if pool is not None:
            if pool not in POOLS or (pool == "token" and self.class_token is None):
                raise ValueError(f"cannot pool by {pool!r} here: choose one of {POOLS} "
                                 "('token' needs a class token)")
            self.config.pool = pool
        self.config.num_classes = num_classes
        device = next(self.parameters()).device
        self.head = nn.Linear(self.embed_dim, num_classes).to(device) if num_classes > 0 else nn.Identity()

    def no_weight_decay(self) -> set[str]:
        """Names of parameters that weight decay should skip beyond norms and biases."""
        names = {"class_token", "reg_token"}
        return {n for n, _ in self.named_parameters() if n.split(".")[0] in names or n.startswith("pos_embed.")}
