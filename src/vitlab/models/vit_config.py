"""What defines a Vision Transformer: :class:`ViTConfig`, its fields, their ranges and how they relate.

The fields keep their order (a checkpoint's ``config.json`` lists them in it). Making a config checks
every field's range (:data:`ViTConfig.checks`), then how the fields relate (a token pool needs a class
token, heads divide the width, patches tile the image, ...), then the parameter count it would build
(:func:`~vitlab.models.config.check_params`); anything wrong raises :class:`~vitlab.errors.ConfigError`.
The model itself is :class:`~vitlab.models.vit.VisionTransformer`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, cast

from ..checks import Bool, Check, Float, Int, Maybe, OneOf, Pair, as_pair, check_fields
from ..errors import ConfigError
from ..layers.attention import ATTENTION_KINDS
from ..layers.conv_stem import conv_stem_widths
from ..layers.hybrid_embed import STEMS, conv_stem_convs
from ..layers.norm import NORM_KINDS
from ..layers.position import POSITION_KINDS
from ..layers.relative_position import REL_POS_KINDS, RelativePositionBias
from ..ops.patches import check_divisible, strided_grid
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
    check_mlp_ratio,
    check_params,
    transformer_block_params,
)

POOLS = ("token", "mean", "max")
PATCH_EMBEDS = ("conv", "linear", "spt", *STEMS)
STEM_REDUCTION = {"conv_stem": 2, "resnet_stem": 4}  # what the patch size must be a multiple of
BIASED_KINDS = ("full", "lsa", "sparse")  # attention kinds that take a relative position bias
BLOCKS = ("prenorm", "postnorm")
POSITION_WIDTH = {"sincos1d": 2, "sincos2d": 4, "rope": 4}  # what the table's width must be a multiple of


@dataclass
class ViTConfig(ModelConfig):
    """Everything that defines a :class:`~vitlab.models.vit.VisionTransformer`.

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

    ``prompt_tokens=P`` prepends ``P`` learned prompt tokens after the position add (visual prompt tuning, Jia
    et al. 2022), between the registers and the distillation token; ``prompt_deep=True`` replaces them with a
    fresh learned set in front of every later block (VPT-deep). They are prefix tokens no head reads.

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
    prompt_tokens: int = 0  # learned prompt tokens after the registers (visual prompt tuning), read by no head
    prompt_deep: bool = False  # a fresh set of prompt tokens in front of every block (VPT-deep), else the first only
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
        "prompt_tokens": Int(0, MAX_TOKENS),
        "prompt_deep": Bool(),
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
        if self.prompt_deep and not self.prompt_tokens:
            raise ConfigError("prompt_deep=True replaces the prompt tokens in every block: set prompt_tokens >= 1")
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
        check_mlp_ratio(self.embed_dim, self.mlp_ratio)
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
        """Tokens ahead of the patch tokens: class token, registers, prompt tokens, distillation token."""
        return int(self.class_token) + self.reg_tokens + self.prompt_tokens + int(self.distill_token)

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
        deep = (self.depth - 1) * self.prompt_tokens * d if self.prompt_deep else 0
        return self.patch_params + tokens * d + blocks + relative + heads + deep + 4 * d

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
