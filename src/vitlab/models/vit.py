"""The Vision Transformer.

images (B, C, H, W)
  -> PatchEmbedding            tokens (B, N, D), N = (H/P) * (W/P) (or a conv stem first: HybridEmbedding)
  -> + positions               (learned, sinusoidal, row+column; or rotary / a relative bias inside attention)
  -> [prefix tokens]           (B, R + N, D): class token, registers, distillation token
  -> depth x Block             pre-norm transformer blocks
  -> norm -> pool              class token or mean over patch tokens -> (B, D)
  -> fc_norm -> head           logits (B, num_classes)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch
from torch import nn

from ..checks import Bool, Check, Float, Int, Maybe, OneOf, Pair, as_pair, check_fields
from ..errors import ConfigError
from ..layers.attention import ATTENTION_KINDS, Rope
from ..layers.block import Block, PostNormBlock
from ..layers.conv_stem import conv_stem_widths
from ..layers.hybrid_embed import STEMS, HybridEmbedding, conv_stem_convs
from ..layers.norm import NORM_KINDS
from ..layers.patch_embed import PatchEmbedding
from ..layers.position import POSITION_KINDS, LearnedPosition, Rotary2d, SinCosPosition, build_position
from ..layers.relative_position import REL_POS_KINDS, RelativePositionBias
from ..layers.shifted_patch import ShiftedPatchTokenization
from ..ops.patches import _pair, check_divisible, strided_grid
from .config import (
    MAX_CHANS,
    MAX_CLASSES,
    MAX_DEPTH,
    MAX_HEADS,
    MAX_SIDE,
    MAX_TOKENS,
    MAX_WIDTH,
    RATE,
    ModelConfig,
    check_params,
    transformer_block_params,
)
from .registry import register_builder, register_model

POOLS = ("token", "mean", "max")
PATCH_EMBEDS = ("conv", "linear", "spt", *STEMS)
STEM_REDUCTION = {"conv_stem": 2, "resnet_stem": 4}  # what the patch size must be a multiple of
BIASED_KINDS = ("full", "lsa", "sparse")  # attention kinds that take a relative position bias
BLOCKS = ("prenorm", "postnorm")
POSITION_WIDTH = {"sincos1d": 2, "sincos2d": 4, "rope": 4}  # what the table's width must be a multiple of


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
    rows (a fixed image size); ``"latent"`` mixes through ``num_latents`` learned tokens; ``"sparse"``
    attends to a band of ``sparse_local`` raster positions, every ``sparse_stride``-th position and the
    prefix tokens (global), both ``None``: the grid's width (a token's row neighbourhood and column). The
    options are read only by their kind, so they change nothing else (parameters, state-dict keys).

    ``rel_pos`` adds a learned relative position bias to the scores of ``full``, ``lsa`` or ``sparse``
    attention (timm's ``VisionTransformerRelPos``): ``"per_block"`` a table in every block,
    ``"shared"`` one for all; usually with ``pos_embed="none"``. A fixed image size.

    Hybrid stems: ``patch_embed="conv_stem"`` runs Xiao et al.'s stride-2 3x3 convolutions (as many as
    the factors of 2 in ``patch_size``, up to 4) before a projection of the rest; ``"resnet_stem"``
    timm's ResNetV2 stem (reduction 4) as in its hybrid ViTs (``patch_size`` a multiple of 4). The token
    grid stays ``img_size / patch_size``.

    ``distill_token=True`` builds a DeiT student (Touvron et al. 2021): one more prefix token, after the
    class and register tokens, read by its own head ``head_dist`` (see :mod:`vitlab.models.distilled`).

    The texts' pitfalls, as switches to measure them: ``block_norm="batchnorm"`` normalises inside every
    block by BatchNorm over the tokens instead of LayerNorm (:mod:`vitlab.layers.norm`); ``causal=True``
    masks every key after its query in sequence order, a language model's mask, on ``full`` attention;
    ``patch_stride`` below ``patch_size`` makes the patch embedding an overlapping tokenizer whose grid is
    ``floor((H - P) / S) + 1`` per side (``None``: the patch size, tiling patches).
    """

    # The fields keep their order (a checkpoint's config.json lists them in it); each section says what it sets.
    # geometry: the images the model takes and how they are cut into patches
    img_size: int | tuple[int, int] = 224  # (H, W), or one side for a square
    patch_size: int = 16  # P: patches of P x P pixels, a grid of (H / P) x (W / P) tokens
    in_chans: int = 3  # C, image channels
    # head: the classifier's outputs
    num_classes: int = 1000  # 0: no head, forward returns the pooled features (B, D)
    # width and depth: the encoder's blocks
    embed_dim: int = 768  # D, the token width
    depth: int = 12  # blocks
    num_heads: int = 12  # H, heads of D / H
    mlp_ratio: float = 4.0  # MLP hidden width / D
    qkv_bias: bool = True  # biases on the Q, K, V projections
    qk_norm: bool = False  # LayerNorm on every head's queries and keys
    # positions: the table added to the patch tokens
    pos_embed: str = "learned"  # one of POSITION_KINDS ("rope" rotates Q and K inside attention instead)
    # prefix tokens and pooling: what is prepended to the patch tokens and what the head reads
    pool: str = "token"  # the class token, or the mean or max over patch tokens
    class_token: bool = True  # a learned class token in front
    reg_tokens: int = 0  # register tokens after it (read by no head)
    distill_token: bool = False  # a DeiT distillation token, with its own head head_dist
    # norms and blocks
    pre_norm: bool = False  # a LayerNorm on the tokens before the first block (timm's norm_pre)
    final_norm: bool = True  # a LayerNorm after the last block (False: none, fc_norm included)
    fc_norm: bool | None = None  # that LayerNorm after pooling, else on every token (None: timm's rule, above)
    block: str = "prenorm"  # "prenorm" (norm, then attention or MLP) or "postnorm" (the norm after the residual)
    block_norm: str = "layernorm"  # the norm inside every block: one of NORM_KINDS
    causal: bool = False  # mask every key after its query (a language model's mask; full attention only)
    layer_scale: float | None = None  # initial value of a learned per-channel scale on every residual branch
    # tokenizer: how a patch becomes a token
    patch_embed: str = "conv"  # one of PATCH_EMBEDS: a conv or linear projection, shifted patches, a conv stem
    patch_stride: int | None = None  # below patch_size: overlapping patches (None: the patch size)
    # attention and its per-kind options: each option is read by its kind alone
    attention: str = "full"  # one of ATTENTION_KINDS
    window_size: int = 7  # "window": windows of M x M patches
    lowrank_k: int = 64  # "lowrank": the rows keys and values are projected to
    num_latents: int = 16  # "latent": the learned tokens attention is routed through
    sparse_local: int | None = None  # "sparse": the band radius (None: the grid's width)
    sparse_stride: int | None = None  # "sparse": the stride of the strided positions (None: the grid's width)
    rel_pos: str = "none"  # a learned relative position bias on the scores: "none", "per_block" or "shared"
    # other image sizes
    pad: bool = False  # zero-pad images whose sides are not multiples of patch_size
    dynamic_img_size: bool = False  # take other image sizes at run time, resampling the positions
    # numerics and regularisation
    norm_eps: float = 1e-6  # every norm's epsilon
    drop_rate: float = 0.0  # dropout inside the blocks and before the head
    pos_drop_rate: float = 0.0  # dropout after adding the positions
    attn_drop_rate: float = 0.0  # dropout on the attention weights
    drop_path_rate: float = 0.0  # stochastic depth, rising linearly from 0 in the first block to this in the last

    checks: ClassVar[dict[str, Check]] = {
        "img_size": Pair(Int(1, MAX_SIDE)),
        "patch_size": Int(1, MAX_SIDE),
        "in_chans": Int(1, MAX_CHANS),
        "num_classes": Int(0, MAX_CLASSES),
        "embed_dim": Int(1, MAX_WIDTH),
        "depth": Int(1, MAX_DEPTH),
        "num_heads": Int(1, MAX_HEADS),
        "mlp_ratio": Float(0, 64, low_open=True),
        "qkv_bias": Bool(),
        "qk_norm": Bool(),
        "pos_embed": OneOf(POSITION_KINDS),
        "pool": OneOf(POOLS),
        "class_token": Bool(),
        "reg_tokens": Int(0, MAX_TOKENS),
        "distill_token": Bool(),
        "pre_norm": Bool(),
        "final_norm": Bool(),
        "fc_norm": Maybe(Bool()),
        "block": OneOf(BLOCKS),
        "block_norm": OneOf(NORM_KINDS),
        "causal": Bool(),
        "layer_scale": Maybe(Float(0, 10, low_open=True)),
        "patch_embed": OneOf(PATCH_EMBEDS),
        "patch_stride": Maybe(Int(1, MAX_SIDE)),
        "attention": OneOf(ATTENTION_KINDS),
        "window_size": Int(1, MAX_SIDE),
        "lowrank_k": Int(1, MAX_TOKENS),
        "num_latents": Int(1, MAX_TOKENS),
        "sparse_local": Maybe(Int(0, MAX_TOKENS)),
        "sparse_stride": Maybe(Int(1, MAX_TOKENS)),
        "rel_pos": OneOf(REL_POS_KINDS),
        "pad": Bool(),
        "dynamic_img_size": Bool(),
        "norm_eps": Float(0, 1, low_open=True),
        "drop_rate": RATE,
        "pos_drop_rate": RATE,
        "attn_drop_rate": RATE,
        "drop_path_rate": RATE,
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        if self.pool == "token" and not self.class_token:
            raise ConfigError(
                "pool='token' reads the class token, but class_token=False: set class_token=True or pool='mean'"
            )
        if self.embed_dim % self.num_heads:
            raise ConfigError(
                f"embed_dim {self.embed_dim} is not divisible by num_heads {self.num_heads}: "
                f"choose a head count that divides it"
            )
        if self.overlapping:
            self._check_stride()
        elif not self.pad:
            check_divisible(*as_pair(self.img_size), self.patch_size)
        if self.causal and self.attention != "full":
            raise ConfigError(
                f"causal=True masks the scores of full attention, got attention={self.attention!r}: "
                f"set attention='full' or causal=False"
            )
        if int(self.embed_dim * self.mlp_ratio) < 1:
            raise ConfigError(
                f"mlp_ratio {self.mlp_ratio} gives an MLP of int({self.embed_dim} * {self.mlp_ratio}) "
                f"= 0 units: raise mlp_ratio"
            )
        if self.pos_embed in POSITION_WIDTH and (width := self.position_width) % POSITION_WIDTH[self.pos_embed]:
            what = "head width embed_dim / num_heads" if self.pos_embed == "rope" else "embed_dim"
            raise ConfigError(
                f"pos_embed={self.pos_embed!r} needs a {what} divisible by "
                f"{POSITION_WIDTH[self.pos_embed]}, got {width}: choose another width or pos_embed"
            )
        if self.patch_embed == "spt" and self.patch_size < 2:
            raise ConfigError(
                f"patch_embed='spt' shifts images by half a patch, so it needs patch_size >= 2, got {self.patch_size}"
            )
        if self.attention == "lsa" and self.num_prefix_tokens + self.grid[0] * self.grid[1] < 2:
            raise ConfigError(
                "attention='lsa' masks each token's own key, so it needs at least 2 tokens, got 1: "
                "use a larger image, a class token or attention='full'"
            )
        if self.attention == "linear" and self.attn_drop_rate:
            raise ConfigError(
                f"attention='linear' forms no attention weights to drop, got attn_drop_rate="
                f"{self.attn_drop_rate}: set it to 0 (use drop_path_rate to regularise)"
            )
        if self.attention == "window" and self.num_prefix_tokens:
            raise ConfigError(
                "attention='window' partitions the patch grid, where a class or register token has "
                "no place: set class_token=False, reg_tokens=0 and pool='mean'"
            )
        if self.rel_pos != "none" and self.attention not in BIASED_KINDS:
            raise ConfigError(
                f"rel_pos={self.rel_pos!r} adds a bias to the scores of attention {BIASED_KINDS}, got "
                f"attention={self.attention!r}: set rel_pos='none' or choose one of those"
            )
        if self.rel_pos != "none" and self.dynamic_img_size:
            raise ConfigError(
                f"rel_pos={self.rel_pos!r} holds a bias table for one patch grid, so it cannot take "
                f"dynamic_img_size=True: fix the image size or set rel_pos='none'"
            )
        if self.patch_embed in STEM_REDUCTION and (self.pad or self.patch_size % STEM_REDUCTION[self.patch_embed]):
            raise ConfigError(
                f"patch_embed={self.patch_embed!r} reduces by powers of 2 in its stem, so it needs a patch_size "
                f"that is a multiple of {STEM_REDUCTION[self.patch_embed]} and pad=False, got patch_size="
                f"{self.patch_size}, pad={self.pad}: choose another patch size or patch_embed='conv'"
            )
        if self.attention == "lowrank" and self.dynamic_img_size:
            raise ConfigError(
                "attention='lowrank' projects a fixed number of tokens, so it cannot take "
                "dynamic_img_size=True: fix the image size or choose another attention"
            )
        check_params(self, self.approx_params, "embed_dim, depth or the token count (img_size / patch_size)")

    def _check_stride(self) -> None:
        stride = self.patch_stride
        if stride is not None and stride > self.patch_size:
            raise ConfigError(
                f"patch_stride {stride} exceeds patch_size {self.patch_size}, which would skip pixels between "
                f"patches: choose a stride in 1..{self.patch_size}"
            )
        if self.patch_embed not in ("conv", "linear") or self.pad or self.dynamic_img_size:
            raise ConfigError(
                f"patch_stride {stride} (overlapping patches) needs patch_embed 'conv' or 'linear', pad=False and "
                f"dynamic_img_size=False, got patch_embed={self.patch_embed!r}, pad={self.pad}, "
                f"dynamic_img_size={self.dynamic_img_size}: drop patch_stride or change those"
            )
        strided_grid(*as_pair(self.img_size), self.patch_size, cast(int, stride))

    @property
    def overlapping(self) -> bool:
        """Whether the patch windows overlap (``patch_stride`` set below the patch size)."""
        return self.patch_stride is not None and self.patch_stride != self.patch_size

    @property
    def grid(self) -> tuple[int, int]:
        h, w = as_pair(self.img_size)
        p = self.patch_size
        if self.patch_stride is not None and self.patch_stride != p:
            return (max(0, h - p) // self.patch_stride + 1, max(0, w - p) // self.patch_stride + 1)
        return (-(-h // p), -(-w // p)) if self.pad else (h // p, w // p)

    @property
    def num_prefix_tokens(self) -> int:
        """Tokens ahead of the patch tokens: class token, registers, distillation token."""
        return int(self.class_token) + self.reg_tokens + int(self.distill_token)

    @property
    def position_width(self) -> int:
        """The width of the position table: the head width for rotary positions, else ``embed_dim``."""
        return self.embed_dim // self.num_heads if self.pos_embed == "rope" else self.embed_dim

    @property
    def approx_params(self) -> int:
        """The parameter count, estimated before building (a fixed position table counts as well)."""
        d, (gh, gw) = self.embed_dim, self.grid
        tokens = self.num_prefix_tokens + gh * gw
        mixing = {
            "window": (2 * self.window_size - 1) ** 2 * self.num_heads,
            "lowrank": 2 * self.lowrank_k * tokens,
            "latent": self.num_latents * d,
        }.get(self.attention, 0)
        bias = RelativePositionBias.num_entries((gh, gw), self.num_prefix_tokens) * self.num_heads
        heads = (1 + int(self.distill_token)) * (d + 1) * self.num_classes
        blocks = self.depth * (transformer_block_params(d, int(d * self.mlp_ratio)) + mixing)
        relative = {"per_block": self.depth * bias, "shared": bias}.get(self.rel_pos, 0)
        return self.patch_params + tokens * d + blocks + relative + heads + 4 * d

    @property
    def patch_params(self) -> int:
        """Parameters of the patch embedding (with a stem's, whose BatchNorm statistics are buffers)."""
        p, c, d = self.patch_size, self.in_chans, self.embed_dim
        if self.patch_embed == "conv_stem":
            widths = conv_stem_widths(d, conv_stem_convs(p))
            convs = sum(9 * c_in * c_out + 2 * c_out for c_in, c_out in zip([c, *widths], widths))
            return convs + (p >> len(widths)) ** 2 * widths[-1] * d + d
        if self.patch_embed == "resnet_stem":
            return 49 * c * 64 + 2 * 64 + (p // 4) ** 2 * 64 * d + d
        return p**2 * c * (5 if self.patch_embed == "spt" else 1) * (d + 2)


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
    """

    def __init__(self, config: ViTConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        cfg = config or ViTConfig()
        if overrides:
            cfg = ViTConfig.from_dict({**cfg.to_dict(), **overrides})
        self.config = cfg
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
        self._init_weights()

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
        if self.dist_token is not None:
            nn.init.trunc_normal_(self.dist_token, std=0.02)

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
        """The class, register and distillation tokens, each expanded to the batch: ``(B, 1|R, D)``."""
        tokens = (self.class_token, self.reg_token, self.dist_token)
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
            x = (
                block(x, rope, grid, queries)
                if block_fn is None
                else block_fn(i, cast(Block, block), x, rope, grid, queries)
            )
        return self.norm(x)

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
        names = {"class_token", "reg_token", "dist_token"}
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
            "stem": r"^(?:class_token|reg_token|dist_token|pos_embed|patch_embed|norm_pre|shared_rel_pos)",
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
    ViTConfig(
        img_size=8,
        patch_size=2,
        in_chans=1,
        num_classes=10,
        embed_dim=64,
        depth=4,
        num_heads=4,
        mlp_ratio=2.0,
        pool="mean",
        class_token=False,
        fc_norm=False,
    ),
    "a small ViT for scikit-learn's 8x8 digits (16 tokens of 4 pixels)",
)
for _size, (_dim, _heads) in {"tiny": (192, 3), "small": (384, 6), "base": (768, 12)}.items():
    register_model(
        f"vit-{_size}-patch16-224",
        ViTConfig(embed_dim=_dim, depth=12, num_heads=_heads),
        f"ViT-{_size[0].upper()}/16 at 224x224, timm-compatible shapes",
    )
