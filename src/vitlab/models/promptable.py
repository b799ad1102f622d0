"""Promptable segmentation (SAM, Kirillov et al. 2023): an image, a point or box prompt -> masks.

    images (B, 3, H, W) -> ViT -> patch tokens (B, N, D) -> neck -> image embedding (B, C, h, w)
    points (B, P, 2), labels (B, P) -> prompt encoder -> prompt tokens (B, P, C)
    [IoU token, K mask tokens, prompt tokens] and the image embedding (+ its Fourier positions)
        -> two-way transformer -> token states, prompt-aware image tokens
        -> pixel decoder (x2 upsampling stages with image skips) -> pixel embeddings (B, C, H, W)
        -> mask k = hypernetwork_k(mask token k) . pixel embeddings: K candidate masks (B, K, H, W)
        -> IoU head on the IoU token: the predicted IoU of each candidate (B, K)

A prompt is a set of points with labels: ``0`` background, ``1`` foreground, ``2`` / ``3`` the two
corners of a box (:func:`box_prompt`), ``-1`` padding. A point's token is the Fourier embedding of its
position plus a learned embedding of its label; the image tokens carry the same Fourier embedding of
their cell centres, so prompts and image meet in one coordinate frame. K candidates answer an
ambiguous prompt (a point on a part or on the whole); the IoU head says which to trust.

The image embedding is computed once per image (:meth:`PromptableModel.encode_image`) and decoded
for any number of prompts (:meth:`PromptableModel.decode`), as SAM's interactive use does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import ConfigError
from ..layers.mlp import MLP
from .config import (
    MAX_DEPTH,
    MAX_HEADS,
    MAX_SIDE,
    MAX_TOKENS,
    MAX_WIDTH,
    Check,
    Float,
    Int,
    ModelConfig,
    Seq,
    check_fields,
    check_params,
    transformer_block_params,
)
from .dense.decoder import CrossAttention
from .dense.heads import ConvDecoder, map_tokens
from .vit import VisionTransformer, ViTConfig

BACKGROUND, FOREGROUND, BOX_TOP_LEFT, BOX_BOTTOM_RIGHT, PADDING = 0, 1, 2, 3, -1
POINT_LABELS = 4  # labels with a learned embedding: background, foreground, the two box corners


@dataclass
class PromptableConfig(ModelConfig):
    """Image encoder (a ViT of these sizes), decoder width ``decoder_dim`` with ``decoder_depth``
    two-way blocks of ``decoder_heads`` heads, ``num_masks`` candidate masks, and the per-channel
    ``mean`` / ``std`` the model normalises its [0, 1] images by. ``pos_scale``: the standard
    deviation of the random Fourier frequencies (cycles per image side / 2)."""

    img_size: int = 64
    patch_size: int = 8
    embed_dim: int = 96
    depth: int = 4
    num_heads: int = 4
    decoder_dim: int = 64
    decoder_depth: int = 2
    decoder_heads: int = 4
    num_masks: int = 3
    pos_scale: float = 1.0
    mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    std: tuple[float, ...] = (0.25, 0.25, 0.25)

    checks: ClassVar[dict[str, Check]] = {
        "img_size": Int(1, MAX_SIDE),
        "patch_size": Int(1, MAX_SIDE),
        "embed_dim": Int(1, MAX_WIDTH),
        "depth": Int(1, MAX_DEPTH),
        "num_heads": Int(1, MAX_HEADS),
        "decoder_dim": Int(2, MAX_WIDTH),
        "decoder_depth": Int(1, MAX_DEPTH),
        "decoder_heads": Int(1, MAX_HEADS),
        "num_masks": Int(1, MAX_TOKENS),
        "pos_scale": Float(0, 1e3, low_open=True),
        "mean": Seq(Float(-255, 255), 3, 3),
        "std": Seq(Float(0, 255, low_open=True), 3, 3),
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        p = self.patch_size
        if p & (p - 1) or self.img_size % p:
            raise ConfigError(
                f"patch_size {p} must be a power of 2 dividing img_size {self.img_size} "
                f"(the pixel decoder upsamples by 2 per stage): use e.g. patch_size=8"
            )
        for dim, heads, what in (
            (self.embed_dim, self.num_heads, "embed_dim"),
            (self.decoder_dim, self.decoder_heads, "decoder_dim"),
        ):
            if dim % heads:
                raise ConfigError(f"{what} {dim} is not divisible by its {heads} heads: choose a divisor")
        if self.decoder_dim % 2:
            raise ConfigError(f"decoder_dim must be even (sin and cos Fourier features), got {self.decoder_dim}")
        check_params(self, self.approx_params, "embed_dim, depth, decoder_dim or decoder_depth")

    @property
    def approx_params(self) -> int:
        """The parameter count, from above: the ViT, a two-way block as two transformer blocks, the
        pixel decoder as nine 3x3 convolutions of the decoder width."""
        d, c = self.embed_dim, self.decoder_dim
        vit = self.depth * transformer_block_params(d, 4 * d) + (self.img_size // self.patch_size) ** 2 * d
        stem = 3 * self.patch_size**2 * d
        decoder = (self.decoder_depth + 1) * 2 * transformer_block_params(c, 4 * c) + 9 * 9 * c * c
        return vit + stem + decoder + (self.num_masks + 1) * 3 * c * c


def box_prompt(boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Boxes ``(B, 4)`` pixel ``(x0, y0, x1, y1)`` -> their corners as points ``(B, 2, 2)`` and
    labels ``(B, 2)`` (:data:`BOX_TOP_LEFT`, :data:`BOX_BOTTOM_RIGHT`)."""
    labels = torch.tensor([BOX_TOP_LEFT, BOX_BOTTOM_RIGHT], device=boxes.device)
    return boxes.reshape(-1, 2, 2), labels.expand(len(boxes), 2)


class FourierPosition(nn.Module):
    """Random Fourier features of 2-D positions in [0, 1] (Tancik et al. 2020; SAM's prompt and
    image positions): ``(..., 2) -> (..., dim)``, ``[sin, cos](2 pi (2 xy - 1) G)`` with fixed
    ``G ~ N(0, scale^2)`` of shape ``(2, dim / 2)``."""

    gaussian: torch.Tensor

    def __init__(self, dim: int, scale: float = 1.0) -> None:
        super().__init__()
        self.register_buffer("gaussian", scale * torch.randn(2, dim // 2))

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        x = 2 * math.pi * (2 * coords - 1) @ self.gaussian.to(coords.dtype)
        return torch.cat([x.sin(), x.cos()], -1)

    def grid(self, h: int, w: int) -> torch.Tensor:
        """The embedding of an ``h x w`` grid's cell centres in raster order, ``(1, h * w, dim)``."""
        ys, xs = torch.meshgrid(
            (torch.arange(h, device=self.gaussian.device) + 0.5) / h,
            (torch.arange(w, device=self.gaussian.device) + 0.5) / w,
            indexing="ij",
        )
        return self(torch.stack([xs.flatten(), ys.flatten()], -1))[None]


class PromptEncoder(nn.Module):
    """Points ``(B, P, 2)`` pixel ``(x, y)`` on an ``img_size`` image and labels ``(B, P)`` -> prompt
    tokens ``(B, P, dim)``: Fourier position of the pixel centre + the label's learned embedding;
    a padding point (label -1) is one learned token, whatever its position."""

    def __init__(self, dim: int, img_size: int, scale: float = 1.0) -> None:
        super().__init__()
        self.img_size = img_size
        self.pe = FourierPosition(dim, scale)
        self.label_embed = nn.Embedding(POINT_LABELS, dim)
        self.not_a_point = nn.Parameter(torch.zeros(dim))
        nn.init.normal_(self.label_embed.weight, std=0.02)

    def forward(self, points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        if points.shape[:-1] != labels.shape or points.shape[-1] != 2:
            raise ConfigError(
                f"points {tuple(points.shape)} and labels {tuple(labels.shape)} must be (B, P, 2) and (B, P)"
            )
        tokens = self.pe((points + 0.5) / self.img_size) + self.label_embed(labels.clamp(min=0))
        return torch.where((labels == PADDING)[..., None], self.not_a_point.to(tokens.dtype), tokens)


class TwoWayBlock(nn.Module):
    """SAM's two-way attention block (post-norm), on tokens ``(B, T, C)`` and image tokens ``(B, N, C)``:

        tokens += self-attention(tokens)             queries and keys carry the prompt positions
        tokens += cross-attention(tokens -> image)   the image keys carry the image positions
        tokens += MLP(tokens)
        image  += cross-attention(image -> tokens)   the image tokens learn the prompt

    each followed by a LayerNorm. Returns the updated ``(tokens, image)``.
    """

    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.self_attn = CrossAttention(dim, num_heads)
        self.norm1 = nn.LayerNorm(dim)
        self.token_to_image = CrossAttention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = MLP(dim, int(dim * mlp_ratio))
        self.norm3 = nn.LayerNorm(dim)
        self.image_to_token = CrossAttention(dim, num_heads)
        self.norm4 = nn.LayerNorm(dim)

    def forward(
        self, tokens: torch.Tensor, image: torch.Tensor, token_pe: torch.Tensor, image_pe: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        tokens = self.norm1(tokens + self.self_attn._attend(tokens + token_pe, tokens, False, token_pe)[0])
        tokens = self.norm2(tokens + self.token_to_image._attend(tokens + token_pe, image, False, image_pe)[0])
        tokens = self.norm3(tokens + self.mlp(tokens))
        image = self.norm4(image + self.image_to_token._attend(image + image_pe, tokens, False, token_pe)[0])
        return tokens, image


class TwoWayTransformer(nn.Module):
    """``depth`` :class:`TwoWayBlock` s, then a last cross-attention of the tokens to the image.

    ``tokens (B, T, C)`` (their initial values are their positions at every layer, as in SAM),
    ``image (B, N, C)``, ``image_pe (1, N, C)`` -> ``(tokens (B, T, C), image (B, N, C))``.
    """

    def __init__(self, dim: int, depth: int, num_heads: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([TwoWayBlock(dim, num_heads) for _ in range(depth)])
        self.final_attn = CrossAttention(dim, num_heads)
        self.norm = nn.LayerNorm(dim)

    def forward(
        self, tokens: torch.Tensor, image: torch.Tensor, image_pe: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        x = tokens
        for layer in self.layers:
            x, image = layer(x, image, tokens, image_pe)
        x = self.norm(x + self.final_attn._attend(x + tokens, image, False, image_pe)[0])
        return x, image


class MaskDecoder(nn.Module):
    """An IoU token and ``num_masks`` mask tokens, with the prompt tokens, decoded against the image
    embedding: ``(image (B, C, h, w), image_pe (1, h * w, C), prompts (B, P, C), images (B, 3, H, W)
    normalised) -> {"masks": logits (B, K, H, W), "iou": predicted IoU in [0, 1] (B, K)}``.

    The pixel embeddings ``(B, C, H, W)`` come from the prompt-aware image tokens through the dense
    heads' :class:`~vitlab.models.dense.heads.ConvDecoder` (x2 stages with skips from the image);
    mask ``k`` is their dot product with an MLP of mask token ``k`` (a hypernetwork per token).
    """

    def __init__(
        self, dim: int, depth: int, num_heads: int, num_masks: int, patch_size: int, in_chans: int = 3
    ) -> None:
        super().__init__()
        self.iou_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.mask_tokens = nn.Parameter(torch.randn(1, num_masks, dim) * 0.02)
        self.transformer = TwoWayTransformer(dim, depth, num_heads)
        self.pixel_decoder = ConvDecoder([dim], patch_size, dim, in_chans, width=dim)
        self.hypernets = nn.ModuleList([MLP(dim, dim) for _ in range(num_masks)])
        self.iou_mlp = MLP(dim, dim)
        self.iou_out = nn.Linear(dim, num_masks)

    def forward(
        self, image: torch.Tensor, image_pe: torch.Tensor, prompts: torch.Tensor, images: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        b, c, h, w = image.shape
        tokens = torch.cat([self.iou_token.expand(b, -1, -1), self.mask_tokens.expand(b, -1, -1), prompts], 1)
        states, attended = self.transformer(tokens, map_tokens(image), image_pe)
        pixels = self.pixel_decoder([attended.transpose(1, 2).reshape(b, c, h, w)], images)
        weights = torch.stack([net(states[:, 1 + i]) for i, net in enumerate(self.hypernets)], 1)  # (B, K, C)
        masks = torch.einsum("bkc,bchw->bkhw", weights, pixels)
        iou = self.iou_out(F.gelu(self.iou_mlp(states[:, 0]))).sigmoid()
        return {"masks": masks, "iou": iou}


class PromptableModel(nn.Module):
    """Images ``(B, 3, H, W)`` in [0, 1] and prompts -> candidate masks and their predicted IoU.

    ``model(images, points (B, P, 2), labels (B, P)) -> {"masks": (B, K, H, W) logits, "iou": (B, K)}``;
    a box is two points (:func:`box_prompt`). ``encode_image`` once, then ``decode`` per prompt.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, config: PromptableConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        config = PromptableConfig(**overrides) if config is None else config
        self.config = config
        self.encoder = VisionTransformer(
            ViTConfig(
                img_size=config.img_size,
                patch_size=config.patch_size,
                in_chans=3,
                num_classes=0,
                embed_dim=config.embed_dim,
                depth=config.depth,
                num_heads=config.num_heads,
                class_token=False,
                pool="mean",
                fc_norm=False,
            )
        )
        self.neck = nn.Linear(config.embed_dim, config.decoder_dim)
        self.neck_norm = nn.LayerNorm(config.decoder_dim)
        self.prompt_encoder = PromptEncoder(config.decoder_dim, config.img_size, config.pos_scale)
        self.decoder = MaskDecoder(
            config.decoder_dim, config.decoder_depth, config.decoder_heads, config.num_masks, config.patch_size
        )
        self.register_buffer("mean", torch.tensor(config.mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(config.std).view(1, -1, 1, 1))

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        return (images - self.mean) / self.std

    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """Images ``(B, 3, H, W)`` in [0, 1] -> image embedding ``(B, C, H/P, W/P)``."""
        tokens = self.neck_norm(self.neck(self.encoder.forward_features(self.normalise(images))))
        h, w = images.shape[-2] // self.config.patch_size, images.shape[-1] // self.config.patch_size
        return tokens.transpose(1, 2).reshape(len(images), -1, h, w)

    def decode(
        self, embedding: torch.Tensor, images: torch.Tensor, points: torch.Tensor, labels: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """``embedding (B, C, h, w)`` of ``images (B, 3, H, W)`` and a prompt per image (points
        ``(B, P, 2)``, labels ``(B, P)``) -> ``{"masks": (B, K, H, W) logits, "iou": (B, K)}``."""
        image_pe = self.prompt_encoder.pe.grid(*embedding.shape[-2:]).to(embedding.dtype)
        prompts = self.prompt_encoder(points, labels)
        return self.decoder(embedding, image_pe, prompts, self.normalise(images))

    def forward(self, images: torch.Tensor, points: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.decode(self.encode_image(images), images, points, labels)
