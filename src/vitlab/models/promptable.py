"""Promptable segmentation (SAM, Kirillov et al. 2023): an image, a point or box prompt -> masks.

    images (B, 3, H, W) -> ViT -> patch tokens -> neck -> image embedding (B, C, h, w)     once per image
    images, image embedding -> pixel features (B, C/4, H/s, W/s)                          once per image
    points (Q, P, 2), labels (Q, P) -> prompt encoder -> prompt tokens (Q, P, C)          per prompt
                                                      -> dense prompt (Q, h * w, C)
    [IoU token, K mask tokens, prompt tokens] and image embedding + dense prompt (+ Fourier positions)
        -> two-way transformer -> token states, prompt-aware image tokens
        -> pixel embeddings (Q, C/4, H/s, W/s): GELU(the image tokens projected and upsampled + pixel features)
        -> mask k = hypernetwork_k(mask token k) . pixel embeddings, upsampled bilinearly: (Q, K, H, W)
        -> IoU head on the IoU token: the predicted IoU of each candidate (Q, K)

A prompt is a set of points with labels: ``0`` background, ``1`` foreground, ``2`` / ``3`` the two
corners of a box (:func:`box_prompt`), ``-1`` padding. A point's token is the Fourier embedding of its
position plus a learned embedding of its label; the image tokens carry the same Fourier embedding of
their cell centres, so prompts and image meet in one coordinate frame. K candidates answer an
ambiguous prompt (a point on a part or on the whole); the IoU head says which to trust.

The dense prompt tells every image cell where it lies relative to each prompt point (an MLP of the
Fourier features of the offset, by label), as SAM's dense (mask) prompt is added to the image
embedding. Without it, where a prompt is must be found by attention alone, matching learned
projections of two absolute Fourier embeddings; a small model trained for minutes never forms that
match (its attention on the prompted object stays at chance) and learns to segment every object.

Masks are predicted at ``1 / mask_stride`` of the image side and upsampled bilinearly (SAM predicts
at 1/4 of 1024 pixels). The image is encoded once (:meth:`PromptableModel.encode_image`) and decoded
for any number of prompts (:meth:`PromptableModel.decode`), as SAM's interactive use does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from ..checks import Check, Float, Int, Seq, check_fields
from ..data.preprocess import Statistics
from ..errors import CheckpointError, ConfigError
from ..layers.mlp import MLP
from .config import (
    MAX_DEPTH,
    MAX_HEADS,
    MAX_SIDE,
    MAX_TOKENS,
    MAX_WIDTH,
    ModelConfig,
    check_params,
    transformer_block_params,
)
from .dense.decoder import CrossAttention
from .dense.heads import map_tokens
from .registry import register_builder
from .vit import patch_encoder

BACKGROUND, FOREGROUND, BOX_TOP_LEFT, BOX_BOTTOM_RIGHT, PADDING = 0, 1, 2, 3, -1
POINT_LABELS = 4  # labels with a learned embedding: background, foreground, the two box corners


@dataclass
class PromptableConfig(ModelConfig):
    """Image encoder (a ViT of these sizes), decoder width ``decoder_dim`` with ``decoder_depth``
    two-way blocks of ``decoder_heads`` heads, ``num_masks`` candidate masks predicted at
    ``1 / mask_stride`` of the image side, and the per-channel ``mean`` / ``std`` the model normalises
    its [0, 1] images by. ``pos_scale``: the standard deviation of the random Fourier frequencies
    (cycles per image side / 2)."""

    img_size: int = 64
    patch_size: int = 8
    embed_dim: int = 96
    depth: int = 4
    num_heads: int = 4
    decoder_dim: int = 64
    decoder_depth: int = 2
    decoder_heads: int = 4
    num_masks: int = 3
    mask_stride: int = 2
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
        "mask_stride": Int(1, MAX_SIDE),
        "pos_scale": Float(0, 1e3, low_open=True),
        "mean": Seq(Float(-255, 255), 3, 3),
        "std": Seq(Float(0, 255, low_open=True), 3, 3),
    }

    def __post_init__(self) -> None:
        check_fields(self, self.checks)
        for side, what in ((self.patch_size, "patch_size"), (self.mask_stride, "mask_stride")):
            if self.img_size % side:
                raise ConfigError(f"{what} {side} does not divide img_size {self.img_size}: choose a divisor")
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
    def pixel_dim(self) -> int:
        """The channels of the per-prompt pixel embeddings: a quarter of the decoder width, at least 8."""
        return max(8, self.decoder_dim // 4)

    @property
    def approx_params(self) -> int:
        """The parameter count, from above: the ViT, a two-way block as two transformer blocks, the
        pixel features, the dense prompt and the per-mask heads as a few ``C x C`` matrices each."""
        d, c = self.embed_dim, self.decoder_dim
        vit = self.depth * transformer_block_params(d, 4 * d) + (self.img_size // self.patch_size) ** 2 * d
        stem = 3 * self.patch_size**2 * d
        decoder = (self.decoder_depth + 1) * 2 * transformer_block_params(c, 4 * c) + 10 * c * c
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

    def features(self, u: torch.Tensor) -> torch.Tensor:
        """``[sin, cos](2 pi u G)`` of ``u (..., 2)`` in units of half the image side: ``(..., dim)``."""
        x = 2 * math.pi * u @ self.gaussian.to(u.dtype)
        return torch.cat([x.sin(), x.cos()], -1)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        return self.features(2 * coords - 1)

    def cells(self, h: int, w: int) -> torch.Tensor:
        """The ``(x, y)`` centres in [0, 1] of an ``h x w`` grid's cells in raster order, ``(h * w, 2)``."""
        ys, xs = torch.meshgrid(
            (torch.arange(h, device=self.gaussian.device) + 0.5) / h,
            (torch.arange(w, device=self.gaussian.device) + 0.5) / w,
            indexing="ij",
        )
        return torch.stack([xs.flatten(), ys.flatten()], -1)


class PromptEncoder(nn.Module):
    """Points ``(Q, P, 2)`` pixel ``(x, y)`` on an ``img_size`` image and labels ``(Q, P)`` -> prompt
    tokens ``(Q, P, dim)``: Fourier position of the pixel centre + the label's learned embedding;
    a padding point (label -1) is one learned token, whatever its position. :meth:`dense` gives the
    dense prompt of a grid of cells."""

    def __init__(self, dim: int, img_size: int, scale: float = 1.0) -> None:
        super().__init__()
        self.img_size = img_size
        self.pe = FourierPosition(dim, scale)
        self.label_embed = nn.Embedding(POINT_LABELS, dim)
        self.not_a_point = nn.Parameter(torch.zeros(dim))
        nn.init.normal_(self.label_embed.weight, std=0.02)
        self.offset_in = nn.Linear(dim, dim)
        self.offset_label = nn.Embedding(POINT_LABELS, dim)
        self.offset_out = nn.Linear(dim, dim)

    def positions(self, points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Pixel points ``(Q, P, 2)`` -> their centres in [0, 1], checking ``labels (Q, P)`` match."""
        if points.shape[:-1] != labels.shape or points.shape[-1] != 2:
            raise ConfigError(
                f"points {tuple(points.shape)} and labels {tuple(labels.shape)} must be (Q, P, 2) and (Q, P)"
            )
        return (points + 0.5) / self.img_size

    def forward(self, points: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        tokens = self.pe(self.positions(points, labels)) + self.label_embed(labels.clamp(min=0))
        return torch.where((labels == PADDING)[..., None], self.not_a_point.to(tokens.dtype), tokens)

    def dense(self, points: torch.Tensor, labels: torch.Tensor, cells: torch.Tensor) -> torch.Tensor:
        """The dense prompt ``(Q, N, dim)`` of cells ``(N, 2)`` in [0, 1]: the sum over the prompt's
        points (padding excluded) of ``MLP_label(Fourier(cell - point))``."""
        offsets = 2 * (cells[None, :, None] - self.positions(points, labels)[:, None])  # (Q, N, P, 2)
        hidden = self.offset_in(self.pe.features(offsets)) + self.offset_label(labels.clamp(min=0))[:, None]
        per_point = self.offset_out(F.gelu(hidden))
        return (per_point * (labels != PADDING)[:, None, :, None].to(per_point.dtype)).sum(2)


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
    tokens: ``(image (Q, N, C) on an h x w grid, image_pe (1, N, C), prompts (Q, P, C), pixels
    (Q, C', H/s, W/s), size (H, W)) -> {"masks": logits (Q, K, H, W), "iou": predicted IoU in [0, 1] (Q, K)}``.

    The pixel embeddings ``(Q, C', H/s, W/s)`` are ``GELU(upsampled (projected prompt-aware image
    tokens) + pixel features)``, ``C' = pixel_dim`` (narrow, as SAM's C / 8: the per-prompt maps are
    the decoder's largest tensors); mask ``k`` is their dot product with an MLP of mask token ``k`` (a
    hypernetwork per token), then upsampled bilinearly to ``size``.
    """

    def __init__(self, dim: int, depth: int, num_heads: int, num_masks: int, pixel_dim: int) -> None:
        super().__init__()
        self.iou_token = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.mask_tokens = nn.Parameter(torch.randn(1, num_masks, dim) * 0.02)
        self.transformer = TwoWayTransformer(dim, depth, num_heads)
        self.coarse_proj = nn.Linear(dim, pixel_dim)
        self.hypernets = nn.ModuleList(
            [nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, pixel_dim)) for _ in range(num_masks)]
        )
        self.iou_mlp = MLP(dim, dim)
        self.iou_out = nn.Linear(dim, num_masks)

    def forward(
        self,
        image: torch.Tensor,
        grid: tuple[int, int],
        image_pe: torch.Tensor,
        prompts: torch.Tensor,
        pixels: torch.Tensor,
        size: tuple[int, int],
    ) -> dict[str, torch.Tensor]:
        q = len(image)
        tokens = torch.cat([self.iou_token.expand(q, -1, -1), self.mask_tokens.expand(q, -1, -1), prompts], 1)
        states, attended = self.transformer(tokens, image, image_pe)
        coarse = self.coarse_proj(attended).transpose(1, 2).reshape(q, -1, *grid)
        fine = F.interpolate(coarse, size=pixels.shape[-2:], mode="bilinear", align_corners=False)
        embeddings = F.gelu(fine + pixels)
        weights = torch.stack([net(states[:, 1 + i]) for i, net in enumerate(self.hypernets)], 1)  # (Q, K, C')
        masks = torch.einsum("qkc,qchw->qkhw", weights, embeddings)
        iou = self.iou_out(F.gelu(self.iou_mlp(states[:, 0]))).sigmoid()
        return {"masks": F.interpolate(masks, size=size, mode="bilinear", align_corners=False), "iou": iou}


class PixelFeatures(nn.Module):
    """The prompt-independent pixel features at ``1 / stride`` of the image side: two 3x3 convs on
    the normalised image average-pooled by ``stride``, plus the projected image embedding upsampled
    bilinearly: ``(images (B, 3, H, W), embedding (B, C, h, w)) -> (B, out_dim, H/stride, W/stride)``."""

    def __init__(self, dim: int, out_dim: int, stride: int, in_chans: int = 3) -> None:
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(in_chans, dim // 2, 3, padding=1)
        self.conv2 = nn.Conv2d(dim // 2, out_dim, 3, padding=1)
        self.proj = nn.Conv2d(dim, out_dim, 1)

    def forward(self, images: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(images, self.stride) if self.stride > 1 else images
        local = self.conv2(F.gelu(self.conv1(x)))
        coarse = self.proj(embedding)
        return local + F.interpolate(coarse, size=local.shape[-2:], mode="bilinear", align_corners=False)


class ImageEncoding(NamedTuple):
    """What :meth:`PromptableModel.encode_image` computes once per image: the image embedding
    ``tokens (B, C, h, w)`` and the pixel features ``pixels (B, C', H/s, W/s)``."""

    tokens: torch.Tensor
    pixels: torch.Tensor


class PromptableModel(nn.Module):
    """Images ``(B, 3, H, W)`` in [0, 1] and prompts -> candidate masks and their predicted IoU.

    ``model(images, points (Q, P, 2), labels (Q, P), image=None) -> {"masks": (Q, K, H, W) logits,
    "iou": (Q, K)}``; prompt ``q`` is on image ``image[q]`` (default: one prompt per image, ``Q = B``).
    A box is two points (:func:`box_prompt`). ``encode_image`` once, then ``decode`` any prompts.
    """

    mean: torch.Tensor
    std: torch.Tensor

    def __init__(self, config: PromptableConfig | None = None, **overrides: Any) -> None:
        super().__init__()
        config = PromptableConfig(**overrides) if config is None else config
        self.config = config
        self.encoder = patch_encoder(
            config.img_size, config.patch_size, config.embed_dim, config.depth, config.num_heads, fc_norm=False
        )
        self.neck = nn.Linear(config.embed_dim, config.decoder_dim)
        self.neck_norm = nn.LayerNorm(config.decoder_dim)
        c = config.decoder_dim
        self.pixel_features = PixelFeatures(c, config.pixel_dim, config.mask_stride)
        self.prompt_encoder = PromptEncoder(c, config.img_size, config.pos_scale)
        self.decoder = MaskDecoder(c, config.decoder_depth, config.decoder_heads, config.num_masks, config.pixel_dim)
        self.register_buffer("mean", torch.tensor(config.mean).view(1, -1, 1, 1))
        self.register_buffer("std", torch.tensor(config.std).view(1, -1, 1, 1))

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """``nn.Module.load_state_dict``, refusing the weights of the earlier full-resolution decoder."""
        if any(k.startswith("decoder.pixel_decoder.") for k in state_dict):
            raise CheckpointError(
                "this promptable checkpoint has the earlier full-resolution mask decoder, which this vitlab "
                "no longer builds: retrain it with `vitlab train --task promptable --dataset shapes`"
            )
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def normalise(self, images: torch.Tensor) -> torch.Tensor:
        return Statistics(self.mean.flatten(), self.std.flatten()).normalize(images)

    def encode_image(self, images: torch.Tensor) -> ImageEncoding:
        """Images ``(B, 3, H, W)`` in [0, 1] -> :class:`ImageEncoding` (embedding ``(B, C, H/P, W/P)``,
        pixel features ``(B, C', H/s, W/s)``)."""
        x = self.normalise(images)
        tokens = self.neck_norm(self.neck(self.encoder.forward_features(x)))
        h, w = images.shape[-2] // self.config.patch_size, images.shape[-1] // self.config.patch_size
        embedding = tokens.transpose(1, 2).reshape(len(images), -1, h, w)
        return ImageEncoding(embedding, self.pixel_features(x, embedding))

    def decode(
        self,
        encoding: ImageEncoding,
        points: torch.Tensor,
        labels: torch.Tensor,
        image: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """The :class:`ImageEncoding` of ``B`` images and ``Q`` prompts (points ``(Q, P, 2)``, labels
        ``(Q, P)``), prompt ``q`` on image ``image[q]`` (default ``arange(B)``) ->
        ``{"masks": (Q, K, H, W) logits, "iou": (Q, K)}``."""
        tokens, pixels = encoding
        if image is not None:
            tokens, pixels = tokens[image], pixels[image]
        h, w = tokens.shape[-2:]
        cells = self.prompt_encoder.pe.cells(h, w).to(tokens.dtype)
        image_pe = self.prompt_encoder.pe(cells)[None]
        dense = self.prompt_encoder.dense(points, labels, cells)
        size = (pixels.shape[-2] * self.config.mask_stride, pixels.shape[-1] * self.config.mask_stride)
        prompts = self.prompt_encoder(points, labels)
        return self.decoder(map_tokens(tokens) + dense, (h, w), image_pe, prompts, pixels, size)

    def forward(
        self, images: torch.Tensor, points: torch.Tensor, labels: torch.Tensor, image: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        return self.decode(self.encode_image(images), points, labels, image)


register_builder(PromptableConfig, PromptableModel)
