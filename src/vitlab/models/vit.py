"""The Vision Transformer.

images (B, C, H, W)
  -> PatchEmbedding            tokens (B, N, D), N = (H/P) * (W/P) (or a conv stem first: HybridEmbedding)
  -> + positions               (learned, sinusoidal, row+column; or rotary / a relative bias inside attention)
  -> [prefix tokens]           (B, R + N, D): class token, registers, distillation token
  -> depth x Block             pre-norm transformer blocks
  -> norm -> pool              class token or mean over patch tokens -> (B, D)
  -> fc_norm -> head           logits (B, num_classes)

Its configuration, :class:`~vitlab.models.vit_config.ViTConfig`, lives in :mod:`vitlab.models.vit_config`;
this module registers the named ViTs (``vit-seed``, ``vit-digits``, timm's ViT-Ti/S/B at 224).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..checks import as_pair
from ..errors import ConfigError
from ..layers.attention import Rope
from ..layers.block import Block, PostNormBlock
from ..layers.hybrid_embed import STEMS, HybridEmbedding
from ..layers.patch_embed import PatchEmbedding
from ..layers.position import LearnedPosition, Rotary2d, SinCosPosition, build_position
from ..layers.relative_position import RelativePositionBias
from ..layers.shifted_patch import ShiftedPatchTokenization
from ..ops.patches import _pair
from .registry import register_builder, register_model
from .vit_config import POOLS, ViTConfig


def init_linears(model: nn.Module) -> None:
    """timm's initialisation of every linear layer in ``model``: truncated normal (std 0.02), zero bias."""
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.trunc_normal_(m.weight, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


# ``block_fn(i, block, x, rope, grid, queries) -> x``: how the encoder runs its block ``i``
BlockFn = Callable[[int, Block, torch.Tensor, Rope | None, tuple[int, int], int | None], torch.Tensor]


def take_indices(depth: int, indices: int | Sequence[int] | None) -> list[int]:
    """The blocks to take, 0-based and ascending, as timm reads ``indices``: ``None`` every block,
    an int ``n`` the last ``n``, a sequence those blocks (negative ones count from the end)."""
    if indices is None or isinstance(indices, int):
        n = depth if indices is None else indices
        if not 0 < n <= depth:
            raise ConfigError(f"indices={n} (the last n blocks) is out of range for depth {depth}: use 1..{depth}")
        return list(range(depth - n, depth))
    if not all(-depth <= i < depth for i in indices):
        raise ConfigError(
            f"block indices {list(indices)} out of range for depth {depth}: use 0..{depth - 1} or negative indices"
        )
    return sorted({i % depth for i in indices})


class VisionTransformer(nn.Module):
    """A ViT classifier: images ``(B, C, H, W)`` -> logits ``(B, num_classes)``.

    ``forward_features`` runs the encoder -- the one place the blocks run -- and returns all tokens
    after the final norm, ``(B, R + N, D)`` with the ``R`` prefix tokens (class token, registers,
    distillation token) first; ``forward_head`` pools and classifies. Its hooks serve the models built
    on it: ``keep`` runs the blocks on a subset of the patch tokens (MAE), ``block_fn`` replaces how a
    block runs (token merging; recording for ``forward_intermediates``), ``readout`` and ``depth`` cut
    the work short. With ``distill_token=True`` the model is a DeiT student (:mod:`vitlab.models.distilled`).
    :meth:`set_grad_checkpointing` recomputes each block's activations in the backward instead of keeping them.
    """

    def __init__(self, config: ViTConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        self.config = cfg = ViTConfig.resolve(config, overrides)
        dim = cfg.embed_dim
        self.num_prefix_tokens = cfg.num_prefix_tokens
        self.patch_embed: PatchEmbedding | ShiftedPatchTokenization | HybridEmbedding
        if cfg.patch_embed == "spt":
            self.patch_embed = ShiftedPatchTokenization(
                cfg.patch_size, cfg.in_chans, dim, pad=cfg.pad, norm_eps=cfg.norm_eps
            )
        elif cfg.patch_embed in STEMS:
            self.patch_embed = HybridEmbedding(cfg.patch_embed, cfg.patch_size, cfg.in_chans, dim)
        else:
            self.patch_embed = PatchEmbedding(
                cfg.patch_size, cfg.in_chans, dim, method=cfg.patch_embed, pad=cfg.pad, stride=cfg.patch_stride
            )
        self.pos_embed = build_position(cfg.pos_embed, cfg.grid, dim)
        self.rope = Rotary2d(cfg.grid, dim // cfg.num_heads, cfg.num_prefix_tokens) if cfg.pos_embed == "rope" else None
        self.class_token = nn.Parameter(torch.zeros(1, 1, dim)) if cfg.class_token else None
        self.reg_token = nn.Parameter(torch.zeros(1, cfg.reg_tokens, dim)) if cfg.reg_tokens else None
        self.prompt_token = nn.Parameter(torch.zeros(1, cfg.prompt_tokens, dim)) if cfg.prompt_tokens else None
        self.deep_prompt = (
            nn.Parameter(torch.zeros(cfg.depth - 1, cfg.prompt_tokens, dim))
            if cfg.prompt_deep and cfg.depth > 1
            else None
        )
        self.dist_token = nn.Parameter(torch.zeros(1, 1, dim)) if cfg.distill_token else None
        self.pos_drop = nn.Dropout(cfg.pos_drop_rate) if cfg.pos_drop_rate > 0 else nn.Identity()
        self.norm_pre = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.pre_norm else nn.Identity()
        block = PostNormBlock if cfg.block == "postnorm" else Block
        rates = torch.linspace(0, cfg.drop_path_rate, cfg.depth).tolist()
        options = dict(
            grid=cfg.grid,
            num_tokens=cfg.num_prefix_tokens + cfg.grid[0] * cfg.grid[1],
            window_size=cfg.window_size,
            lowrank_k=cfg.lowrank_k,
            num_latents=cfg.num_latents,
            sparse_local=cfg.sparse_local,
            sparse_stride=cfg.sparse_stride,
            global_tokens=cfg.num_prefix_tokens,
            **({"causal": True} if cfg.causal else {}),
        )
        self.blocks = nn.ModuleList(
            [
                block(
                    dim,
                    cfg.num_heads,
                    cfg.mlp_ratio,
                    qkv_bias=cfg.qkv_bias,
                    qk_norm=cfg.qk_norm,
                    dropout=cfg.drop_rate,
                    attn_drop=cfg.attn_drop_rate,
                    drop_path=rate,
                    layer_scale=cfg.layer_scale,
                    norm_eps=cfg.norm_eps,
                    attention=cfg.attention,
                    attention_options={**options, "shift": i % 2 == 1, **self._block_position_bias()},
                    norm=cfg.block_norm,
                )
                for i, rate in enumerate(rates)
            ]
        )
        self.shared_rel_pos = self._relative_position_bias() if cfg.rel_pos == "shared" else None
        if self.shared_rel_pos is not None:
            for b in self.blocks:
                cast(Block, b).attn.share_position_bias(self.shared_rel_pos)
        use_fc_norm = cfg.pool in ("mean", "max") if cfg.fc_norm is None else cfg.fc_norm
        self.norm = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.final_norm and not use_fc_norm else nn.Identity()
        self.fc_norm = nn.LayerNorm(dim, eps=cfg.norm_eps) if cfg.final_norm and use_fc_norm else nn.Identity()
        self.head_drop = nn.Dropout(cfg.drop_rate) if cfg.drop_rate > 0 else nn.Identity()
        self.head = self._classifier(cfg.num_classes)
        self.head_dist = self._classifier(cfg.num_classes) if cfg.distill_token else None
        self.grad_checkpointing = False
        self._init_weights()

    def set_grad_checkpointing(self, enable: bool = True) -> None:
        """Activation checkpointing (timm's switch): while gradients are on, each block keeps only its input and
        runs again in the backward (``torch.utils.checkpoint``, non-reentrant, the same dropout draws), so the
        blocks' activations take one block's memory instead of ``depth`` blocks'; the gradients are unchanged.
        Blocks run through a ``block_fn`` are not checkpointed."""
        self.grad_checkpointing = enable

    def _relative_position_bias(self) -> RelativePositionBias:
        cfg = self.config
        return RelativePositionBias(cfg.grid, cfg.num_heads, cfg.num_prefix_tokens)

    def _block_position_bias(self) -> dict[str, RelativePositionBias]:
        """A block's own relative position bias (``rel_pos="per_block"``) as an attention option, or none."""
        return {"rel_pos": self._relative_position_bias()} if self.config.rel_pos == "per_block" else {}

    def _classifier(self, num_classes: int) -> nn.Module:
        return nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()

    def _init_weights(self) -> None:
        """timm's ViT initialisation: :func:`init_linears`, near-zero special tokens, DeiT's distillation token."""
        init_linears(self)
        for token in (self.class_token, self.reg_token):
            if token is not None:
                nn.init.normal_(token, std=1e-6)
        for token in (self.dist_token, self.prompt_token, self.deep_prompt):
            if token is not None:
                nn.init.trunc_normal_(token, std=0.02)

    @property
    def embed_dim(self) -> int:
        return self.config.embed_dim

    @property
    def num_classes(self) -> int:
        return self.config.num_classes

    @property
    def readout(self) -> int | None:
        """Tokens the heads read from the last block: under ``pool="token"`` the class token (through the
        distillation token, after the registers, for a student); ``None`` (every token) otherwise, and
        with BatchNorm blocks, whose statistics in training would then cover those tokens alone."""
        if self.config.pool != "token" or self.config.block_norm == "batchnorm":
            return None
        return self.num_prefix_tokens if self.dist_token is not None else 1

    def grid_size(self, height: int, width: int) -> tuple[int, int]:
        """The patch grid for an image ``height x width``; raises a clear error if it cannot run."""
        if (height, width) != self.config.img_size and not self.config.dynamic_img_size:
            h, w = as_pair(self.config.img_size)
            raise ConfigError(
                f"image {height}x{width} differs from the model's img_size {h}x{w}: resize it, "
                f"build the model with img_size=({height}, {width}) (model.set_image_size "
                f"resamples learned positions), or with dynamic_img_size=True"
            )
        return self.patch_embed.grid_size(height, width)

    def set_image_size(self, img_size: int | tuple[int, int]) -> None:
        """Run at a new image size from now on: a learned position table is resampled bicubically,
        a sinusoidal one recomputed."""
        size = _pair(img_size, "img_size")
        if self.config.rel_pos != "none":
            raise ConfigError(
                f"rel_pos={self.config.rel_pos!r} holds a bias table for the {self.config.grid} grid: build "
                f"the model at img_size={size} instead (vitlab does not resample relative bias tables)"
            )
        grid = self.patch_embed.grid_size(*size)
        if isinstance(self.pos_embed, (LearnedPosition, SinCosPosition)):
            self.pos_embed.resample_(grid)
        self.config.img_size = size
        self.pos_embed.grid = grid
        if self.rope is not None:
            self.rope = Rotary2d(grid, self.rope.head_dim, self.rope.num_prefix).to(self.rope.sin.device)

    def prefix_tokens(self, batch: int) -> list[torch.Tensor]:
        """The class, register, prompt and distillation tokens, each expanded to the batch: ``(B, 1|R|P, D)``."""
        tokens = (self.class_token, self.reg_token, self.prompt_token, self.dist_token)
        return [t.expand(batch, -1, -1) for t in tokens if t is not None]

    def check_keep(self) -> None:
        """Raise :class:`~vitlab.errors.ConfigError` unless the blocks can run on a subset of the patch tokens."""
        if self.config.attention in ("window", "lowrank", "sparse"):
            raise ConfigError(
                f"attention={self.config.attention!r} needs every patch token (windows tile the "
                f"whole grid; low-rank projects a fixed count; a sparse pattern is laid on raster positions), "
                f"so it cannot run on a subset of them (MAE's visible tokens): use attention 'full', 'lsa', "
                f"'linear' or 'latent'"
            )
        if self.config.rel_pos != "none":
            raise ConfigError(
                f"rel_pos={self.config.rel_pos!r} biases every pair of the whole grid, so the blocks cannot "
                f"run on a subset of the patch tokens (MAE's visible tokens): use rel_pos='none'"
            )
        if self.config.overlapping:
            raise ConfigError(
                f"patch_stride {self.config.patch_stride} makes tokens of overlapping windows, which do not stand "
                f"for patches of the image one to one, so vitlab does not drop some of them: drop patch_stride"
            )

    def embed(self, images: torch.Tensor, keep: torch.Tensor | None = None) -> tuple[torch.Tensor, tuple[int, int]]:
        """Patch tokens with positions, after the prefix tokens: ``(B, R + N, D)``, and the grid.
        ``keep (B, K)``: only the patch tokens at these raster indices, in this order: ``(B, R + K, D)``."""
        grid = self.grid_size(*images.shape[-2:])
        x = self.pos_embed(self.patch_embed(images), grid)
        if keep is not None:
            self.check_keep()
            x = torch.take_along_dim(x, keep[..., None], dim=1)
        x = torch.cat(self.prefix_tokens(x.shape[0]) + [x], dim=1)
        return self.norm_pre(self.pos_drop(x)), grid

    def rotary(self, grid: tuple[int, int], keep: torch.Tensor | None = None) -> Rope | None:
        """Rotary ``(sin, cos)`` for the tokens of :meth:`embed`: each ``(R + N, d)``, or ``(B, 1, R + K, d)``
        with ``keep (B, K)`` (the rows of the kept patches: every token keeps its own angles);
        ``None`` without rotary positions."""
        if self.rope is None:
            return None
        tables = self.rope(grid)
        if keep is None:
            return tables
        r = self.num_prefix_tokens
        sin, cos = (torch.cat([t[:r].expand(len(keep), -1, -1), t[r:][keep]], dim=1)[:, None] for t in tables)
        return sin, cos

    def forward_features(
        self,
        images: torch.Tensor,
        readout: int | None = None,
        *,
        keep: torch.Tensor | None = None,
        block_fn: BlockFn | None = None,
        depth: int | None = None,
    ) -> torch.Tensor:
        """The encoder: images ``(B, C, H, W)`` -> tokens after the final norm ``(B, R + N, D)``.

        ``readout = n``: the last block computes the first ``n`` tokens only, ``(B, n, D)`` (attention still
        reads every token). ``keep (B, K)``: the blocks see the prefix tokens and the patch tokens at these
        raster indices only, ``(B, R + K, D)``, with their own positions (rotary ones too). ``block_fn(i,
        block, x, rope, grid, queries)`` runs block ``i`` instead of ``block(x, rope, grid, queries)``.
        ``depth``: run the first ``depth`` blocks only.
        """
        x, grid = self.embed(images, keep)
        rope = self.rotary(grid, keep)
        blocks = self.blocks if depth is None else self.blocks[:depth]
        for i, block in enumerate(blocks):
            queries = readout if i == len(blocks) - 1 else None
            if self.deep_prompt is not None and i > 0:
                x = self.replace_prompts(x, i)
            if block_fn is not None:
                x = block_fn(i, cast(Block, block), x, rope, grid, queries)
            elif self.grad_checkpointing and torch.is_grad_enabled():
                x = checkpoint(block, x, rope, grid, queries, use_reentrant=False)
            else:
                x = block(x, rope, grid, queries)
        return self.norm(x)

    def replace_prompts(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Tokens ``(B, R + N, D)`` in front of block ``i >= 1`` with the prompt tokens replaced by that block's
        own learned set (VPT-deep)."""
        assert self.deep_prompt is not None
        start = int(self.class_token is not None) + self.config.reg_tokens
        prompts = self.deep_prompt[i - 1].expand(x.shape[0], -1, -1)
        return torch.cat([x[:, :start], prompts, x[:, start + prompts.shape[1] :]], dim=1)

    def forward_intermediates(
        self,
        images: torch.Tensor,
        indices: int | Sequence[int] | None = None,
        return_prefix_tokens: bool = False,
        norm: bool = False,
        stop_early: bool = False,
        output_fmt: str = "NCHW",
        intermediates_only: bool = False,
    ) -> list[Any] | tuple[torch.Tensor, list[Any]]:
        """Block outputs as timm's ``forward_intermediates`` gives them.

        Images ``(B, C, H, W)`` -> ``(final tokens (B, R + N, D) after the norm, intermediates)``, or the
        intermediates alone with ``intermediates_only``. They are the patch tokens after the blocks of
        :func:`take_indices` ``(indices)``, in block order: ``(B, D, H/P, W/P)`` maps (``output_fmt="NCHW"``)
        or ``(B, N, D)`` tokens (``"NLC"``); ``norm`` passes them through the final norm; with
        ``return_prefix_tokens`` each is a pair ``(patches, prefix tokens (B, R, D))`` (when ``R > 0``).
        ``stop_early`` runs no block after the last one taken (the final tokens are then its output).
        """
        if output_fmt not in ("NCHW", "NLC"):
            raise ConfigError(f"output_fmt must be 'NCHW' or 'NLC', got {output_fmt!r}")
        take = take_indices(len(self.blocks), indices)
        taken = []

        def record(
            i: int, block: Block, x: torch.Tensor, rope: Rope | None, grid: tuple[int, int], queries: int | None
        ) -> torch.Tensor:
            x = block(x, rope, grid, queries)
            if i in take:
                taken.append(x)
            return x

        final = self.forward_features(images, block_fn=record, depth=take[-1] + 1 if stop_early else None)
        grid, r = self.grid_size(*images.shape[-2:]), self.num_prefix_tokens
        maps = []
        for x in taken:
            x = self.norm(x) if norm else x
            patches = x[:, r:].transpose(1, 2).reshape(len(x), -1, *grid) if output_fmt == "NCHW" else x[:, r:]
            maps.append((patches, x[:, :r]) if return_prefix_tokens and r else patches)
        return maps if intermediates_only else (final, maps)

    def pool(self, tokens: torch.Tensor, size: torch.Tensor | None = None) -> torch.Tensor:
        """``(B, R + N, D) -> (B, D)``: the class token, or the mean / max over patch tokens. ``size
        (B, R + N, 1)``: how many patches each token stands for (token merging), which weighs the mean."""
        if self.config.pool == "token":
            return tokens[:, 0]
        patches = tokens[:, self.num_prefix_tokens :]
        if self.config.pool == "max":
            return patches.amax(dim=1)
        if size is None:
            return patches.mean(dim=1)
        weights = size[:, self.num_prefix_tokens :]
        return (patches * weights).sum(dim=1) / weights.sum(dim=1)

    def forward_head(
        self, tokens: torch.Tensor, pre_logits: bool = False, size: torch.Tensor | None = None
    ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Encoded tokens ``(B, R + N, D)`` -> logits ``(B, num_classes)`` (or pooled ``(B, D)``); ``size``
        as in :meth:`pool`. A DeiT student's distillation head reads the last prefix token: its logits and
        the class head's are ``(cls, dist)`` in training mode and their mean in eval mode."""
        x = self.head_drop(self.fc_norm(self.pool(tokens, size)))
        if pre_logits:
            return x
        logits = self.head(x)
        if self.head_dist is None:
            return logits
        dist = self.head_dist(self.head_drop(self.fc_norm(tokens[:, self.num_prefix_tokens - 1])))
        return (logits, dist) if self.training else (logits + dist) / 2

    def forward(self, images: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """Images ``(B, C, H, W)`` -> logits ``(B, num_classes)`` (a student in training mode: both heads').
        The heads read the class token alone under ``pool="token"``, so the last block computes only
        :attr:`readout` tokens (its attention still reads every token): the logits of
        ``forward_head(forward_features(images))`` for about one block's MLP and projections less work --
        as nanoGPT's inference reads the last position only."""
        return self.forward_head(self.forward_features(images, readout=self.readout))

    def reset_classifier(self, num_classes: int, pool: str | None = None) -> None:
        """Replace the head (and a student's distillation head) with fresh ones for ``num_classes`` (0
        removes them), optionally re-pool."""
        if pool is not None:
            if pool not in POOLS or (pool == "token" and self.class_token is None):
                raise ConfigError(f"cannot pool by {pool!r} here: choose one of {POOLS} ('token' needs a class token)")
            self.config.pool = pool
        self.config.num_classes = num_classes
        device = next(self.parameters()).device
        self.head = self._classifier(num_classes).to(device)
        if self.head_dist is not None:
            self.head_dist = self._classifier(num_classes).to(device)

    def no_weight_decay(self) -> set[str]:
        """Names of parameters that weight decay should skip beyond norms and biases."""
        names = {"class_token", "reg_token", "dist_token", "prompt_token", "deep_prompt"}
        return {
            n
            for n, _ in self.named_parameters()
            if n.split(".")[0] in names or n.startswith("pos_embed.") or n.endswith("relative_position_bias_table")
        }

    def group_matcher(self, coarse: bool = False) -> dict[str, Any]:
        """timm's parameter groups (for layer-wise decay): regexes for the stem (embedding, prefix tokens)
        and one group per block, the final norm in the last block's (timm's ``99999``: the previous
        group); the heads match none. ``coarse`` changes nothing for a ViT (as in timm)."""
        return {
            "stem": r"^(?:class_token|reg_token|prompt_token|deep_prompt|dist_token|pos_embed|patch_embed|norm_pre"
            r"|shared_rel_pos)",
            "blocks": [(r"^blocks\.(\d+)", None), (r"^norm\.", (99999,))],
        }


def patch_encoder(
    img_size: int, patch_size: int, embed_dim: int, depth: int, num_heads: int, **overrides: Any
) -> VisionTransformer:
    """A headless ViT over RGB images that keeps only patch tokens (no class token, mean pooling): the
    image encoder of the dense and promptable models. ``overrides``: further :class:`ViTConfig` fields."""
    config = ViTConfig(
        img_size=img_size,
        patch_size=patch_size,
        in_chans=3,
        num_classes=0,
        embed_dim=embed_dim,
        depth=depth,
        num_heads=num_heads,
        class_token=False,
        pool="mean",
        **overrides,
    )
    return VisionTransformer(config)


register_builder(ViTConfig, VisionTransformer)

# The textbook's Keras model: 28x28x1, patch 7 -> 16 tokens of 49 values, Dense 49->64, learned
# 16x64 positions, 2 pre-norm blocks (4 heads of 16, MLP 64->128->64), LayerNorm on every token,
# mean over tokens, Dense 64->10.
VIT_SEED = ViTConfig(
    img_size=28,
    patch_size=7,
    in_chans=1,
    num_classes=10,
    embed_dim=64,
    depth=2,
    num_heads=4,
    mlp_ratio=2.0,
    pos_embed="learned",
    pool="mean",
    class_token=False,
    fc_norm=False,
)
register_model("vit-seed", VIT_SEED, "the textbook's Keras ViT for 28x28 greyscale (71,946 parameters)")
register_model(
    "vit-seed-sincos",
    ViTConfig(**{**VIT_SEED.to_dict(), "pos_embed": "sincos2d"}),
    "vit-seed with fixed 2-D sinusoidal positions",
)
# timm's order for a mean-pooled ViT: average the tokens, then one LayerNorm (fc_norm) -- the Keras listing
# normalises every token before averaging. Same 71,946 parameters; measured in benchmarks/RESULTS.md.
register_model(
    "vit-seed-fcnorm",
    ViTConfig(**{**VIT_SEED.to_dict(), "fc_norm": None}),
    "vit-seed with its final LayerNorm after the mean pool (timm's order)",
)
# vit-seed's budget spent on the small-data tricks of Lee, Lee & Song (2021): Shifted Patch
# Tokenization over 4x4 patches (49 tokens) and Locality Self-Attention, with an MLP of ratio 1.5
# to stay under vit-seed's 71,946 parameters (67,948). Train it with `--recipe small-data`.
register_model(
    "vit-seed-small-data",
    ViTConfig(**{**VIT_SEED.to_dict(), "patch_size": 4, "patch_embed": "spt", "attention": "lsa", "mlp_ratio": 1.5}),
    "vit-seed's size with shifted patches (4x4) and locality self-attention (67,948 parameters)",
)
register_model(
    "vit-digits",
    ViTConfig(**{**VIT_SEED.to_dict(), "img_size": 8, "patch_size": 2, "depth": 4}),  # vit-seed, 4 blocks at 8x8
    "a small ViT for scikit-learn's 8x8 digits (16 tokens of 4 pixels)",
)
for _size, (_dim, _heads) in {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}.items():
    register_model(
        f"vit-{_size}-patch16-224",
        ViTConfig(embed_dim=_dim, depth=12, num_heads=_heads),
        f"ViT-{_size[0].upper()}/16 at 224x224, timm-compatible shapes",
    )
