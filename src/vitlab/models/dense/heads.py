"""Dense heads on backbone feature maps ``(B, D, H/P, W/P)`` (from ``forward_intermediates``).

- :class:`LinearSegHead`: a linear classifier on every patch token, upsampled bilinearly to pixels.
- :class:`ConvDecoder`: fuses the maps of several blocks, then upsamples by 2 per stage, each stage
  joined by a skip connection from the image at that scale, to recover boundary detail.
- :class:`QueryMaskHead`: learned queries decode mask embeddings and classes (MaskFormer-style).
- :class:`DETRHead`: object queries (learned, or one per image token) with anchor boxes refined
  layer by layer decode boxes ``(cx, cy, w, h)`` in [0, 1] and classes.

Each head is called as ``head(maps, images)``, ``maps`` a list of ``(B, D, h, w)``, ``images``
``(B, C, H, W)``, and returns a dict (keys in each docstring).
"""

from __future__ import annotations

import math
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
from torchvision.ops import box_convert, nms

from ...errors import ConfigError
from ...layers.mlp import MLP
from .decoder import TransformerDecoder, sine_embed, sine_pos_2d


def map_tokens(feature_map: torch.Tensor) -> torch.Tensor:
    """``(B, D, h, w) -> (B, h * w, D)``."""
    return feature_map.flatten(2).transpose(1, 2)


class LinearSegHead(nn.Module):
    """Last map ``(B, D, h, w)`` -> per-patch logits -> bilinear upsampling: ``{"logits": (B, K, H, W)}``."""

    def __init__(self, dim: int, num_classes: int) -> None:
        super().__init__()
        self.classifier = nn.Conv2d(dim, num_classes, 1)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.classifier(maps[-1])
        return {"logits": F.interpolate(logits, size=images.shape[-2:], mode="bilinear", align_corners=False)}


class ConvBlock(nn.Module):
    """``convs`` (1 or 2) ``3x3 conv -> BatchNorm -> ReLU``: ``(B, C_in, h, w) -> (B, C_out, h, w)``."""

    def __init__(self, in_channels: int, out_channels: int, convs: int = 2) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False) if convs == 2 else None
        self.bn2 = nn.BatchNorm2d(out_channels) if convs == 2 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        return x if self.conv2 is None or self.bn2 is None else F.relu(self.bn2(self.conv2(x)))


class DecoderStage(nn.Module):
    """Upsample ``x`` by 2, concatenate a skip from the image at that scale, convolve."""

    def __init__(self, in_channels: int, skip_channels: int, out_channels: int, in_chans: int, convs: int = 2) -> None:
        super().__init__()
        self.skip = nn.Conv2d(in_chans, skip_channels, 3, padding=1)
        self.block = ConvBlock(in_channels + skip_channels, out_channels, convs)

    def forward(self, x: torch.Tensor, images: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
        image = F.adaptive_avg_pool2d(images, (x.shape[-2], x.shape[-1]))
        return self.block(torch.cat([x, F.relu(self.skip(image))], dim=1))


class ConvDecoder(nn.Module):
    """Maps of several blocks -> ``(B, out_channels, H, W)`` through ``log2(P)`` upsampling stages.

    The maps are resized to the largest one and fused by a 1x1 conv of width ``width``; stage ``s``
    doubles the resolution and halves the width (at least 16), with a skip from the image. Every
    stage has two 3x3 convs but the last (full resolution, where convs cost most), which has one.
    """

    def __init__(self, dims: list[int], patch_size: int, out_channels: int, in_chans: int = 3, width: int = 96) -> None:
        super().__init__()
        stages = int(math.log2(patch_size))
        if 2**stages != patch_size:
            raise ConfigError(
                f"the decoder upsamples by 2 per stage, so patch_size must be a power of 2, "
                f"got {patch_size}: use patch 4, 8, 16 or the linear head"
            )
        self.fuse = nn.Conv2d(sum(dims), width, 1)
        widths = [width] + [max(16, width >> (s + 1)) for s in range(stages)]
        self.stages = nn.ModuleList(
            [
                DecoderStage(
                    widths[s], max(8, widths[s + 1] // 2), widths[s + 1], in_chans, convs=1 if s == stages - 1 else 2
                )
                for s in range(stages)
            ]
        )
        self.out = nn.Conv2d(widths[-1], out_channels, 1)
        self.to(memory_format=torch.channels_last)  # ~20% faster convolutions on CPU (oneDNN)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> torch.Tensor:
        maps = [m.contiguous(memory_format=torch.channels_last) for m in maps]
        images = images.contiguous(memory_format=torch.channels_last)
        size = max((m.shape[-2:] for m in maps), key=lambda s: s[0] * s[1])
        x = self.fuse(
            torch.cat(
                [
                    F.interpolate(m, size=size, mode="bilinear", align_corners=False) if m.shape[-2:] != size else m
                    for m in maps
                ],
                dim=1,
            )
        )
        for stage in self.stages:
            x = stage(x, images)
        return self.out(x)


class ConvDecoderHead(nn.Module):
    """Encoder-decoder segmentation: ``{"logits": (B, K, H, W)}`` from :class:`ConvDecoder`."""

    def __init__(self, dims: list[int], patch_size: int, num_classes: int, in_chans: int = 3, width: int = 96) -> None:
        super().__init__()
        self.decoder = ConvDecoder(dims, patch_size, num_classes, in_chans, width)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"logits": self.decoder(maps, images)}


class QueryHeadBase(nn.Module):
    """Image tokens from the last map, projected to ``width``, decoded by learned queries."""

    def __init__(self, dim: int, num_logits: int, width: int, num_queries: int, depth: int, num_heads: int) -> None:
        super().__init__()
        self.input_proj = nn.Linear(dim, width)
        self.decoder = TransformerDecoder(width, depth, num_heads, num_queries)
        self.class_head = nn.Linear(width, num_logits)

    def decode(self, maps: list[torch.Tensor]) -> torch.Tensor:
        """``(depth, B, Q, width)``: every decoder layer's query states."""
        return self.decoder(self.input_proj(map_tokens(maps[-1])))


class QueryMaskHead(QueryHeadBase):
    """Mask classification. Returns ``{"logits": (B, Q, K + 1), "masks": (B, Q, H, W), "aux": [...]}``.

    ``K`` semantic classes (background included) plus a no-object logit (last); each query's mask is
    the dot product of its mask embedding with per-pixel embeddings from a :class:`ConvDecoder`.
    """

    def __init__(
        self,
        dims: list[int],
        patch_size: int,
        num_classes: int,
        in_chans: int = 3,
        width: int = 64,
        num_queries: int = 10,
        depth: int = 2,
        num_heads: int = 4,
    ) -> None:
        super().__init__(dims[-1], num_classes + 1, width, num_queries, depth, num_heads)
        self.pixel_decoder = ConvDecoder(dims, patch_size, width, in_chans)
        self.mask_mlp = MLP(width, width)

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict:
        states = self.decode(maps)
        pixels = self.pixel_decoder(maps, images)
        outs = [
            {"logits": self.class_head(s), "masks": torch.einsum("bqc,bchw->bqhw", self.mask_mlp(s), pixels)}
            for s in states
        ]
        return {**outs[-1], "aux": outs[:-1]}


def semantic_from_queries(logits: torch.Tensor, masks: torch.Tensor) -> torch.Tensor:
    """Mask-classification outputs -> per-pixel class scores ``(B, K, H, W)``:
    ``sum_q p(class | q) * sigmoid(mask_q)``, the no-object class dropped."""
    return torch.einsum("bqk,bqhw->bkhw", logits.softmax(-1)[..., :-1], masks.sigmoid())


class BoxPredictor(nn.Module):
    """Query states ``(B, Q, D)`` and reference boxes as logits ``(B, Q, 4)`` -> class logits
    ``(B, Q, K + 1)`` and refined box logits ``ref + MLP(state)`` ``(B, Q, 4)``. The last layer
    starts at zero, so an untrained predictor returns its reference boxes."""

    def __init__(self, width: int, num_logits: int) -> None:
        super().__init__()
        self.class_head = nn.Linear(width, num_logits)
        self.box_mlp = MLP(width, width)
        self.box_out = nn.Linear(width, 4)
        nn.init.zeros_(self.box_out.weight)
        nn.init.zeros_(self.box_out.bias)

    def forward(self, states: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.class_head(states), ref + self.box_out(F.relu(self.box_mlp(states)))


def box_relations(boxes: torch.Tensor) -> torch.Tensor:
    """Pairwise box geometry ``(B, Q, 4) -> (B, Q, Q, 4)`` (Relation-DETR's position relation): for
    boxes ``(cx, cy, w, h)`` ``i`` and ``j``, ``log(|cx_i - cx_j| / w_i + 1)``, the same for ``y``,
    ``log(w_i / w_j)`` and ``log(h_i / h_j)``; all zero for a box and itself or its duplicate."""
    cx, cy, w, h = (c.clamp(min=1e-4) for c in boxes.unbind(-1))
    rel = [
        ((cx[..., :, None] - cx[..., None, :]).abs() / w[..., :, None]).log1p(),
        ((cy[..., :, None] - cy[..., None, :]).abs() / h[..., :, None]).log1p(),
        (w[..., :, None] / w[..., None, :]).log(),
        (h[..., :, None] / h[..., None, :]).log(),
    ]
    return torch.stack(rel, -1)


class DETRHead(nn.Module):
    """Detection. Returns ``{"logits": (B, Q, K + 1), "boxes": (B, Q, 4), "aux": [...]}``:
    ``K`` object classes plus no-object (last), boxes ``(cx, cy, w, h)`` relative to the image.

    DETR with the usual fast-converging refinements (Conditional / DAB-DETR, Deformable DETR's box
    refinement): the image tokens' keys carry a fixed 2-D sine position; each object query has an
    anchor box whose sine embedding is the query's position; every decoder layer predicts a
    correction of the box in logit space, and the next layer starts from the refined (detached) box.
    Every layer's class and box predictions feed the auxiliary losses. The queries' self-attention,
    where DETR learns to drop duplicates, sees how their boxes lie: a small MLP of
    :func:`box_relations` adds a bias per head to its scores (Relation-DETR); it starts at zero.

    ``queries="learned"``: ``num_queries`` learned queries with learned anchors (initialised on a
    grid). ``queries="tokens"`` (two-stage, as in Deformable DETR / DINO, with DDQ-DETR's distinct
    queries): first every image token proposes a class and a box, refined from a box of side
    ``anchor_size`` centred on its cell. The proposals are returned as ``"proposals"`` (same keys as
    the output) for a one-to-many loss that teaches several tokens per object (see
    :class:`~vitlab.tasks.dense.losses.DetectionLoss`), so neighbouring tokens propose near-identical boxes;
    class-agnostic NMS at IoU ``query_nms`` keeps one of each, and the ``num_queries`` best-scored
    distinct proposals become the queries: content the token, anchor its (detached) box. The decoder's
    one-to-one set loss (Hungarian matching, no-object class) then decides among queries that differ,
    and its output needs no NMS.
    """

    def __init__(
        self,
        dim: int,
        num_classes: int,
        width: int = 64,
        num_queries: int = 10,
        depth: int = 2,
        num_heads: int = 4,
        queries: str = "learned",
        anchor_size: float = 0.25,
        query_nms: float = 0.5,
    ) -> None:
        super().__init__()
        if queries not in ("learned", "tokens"):
            raise ConfigError(f"DETR queries must be 'learned' or 'tokens', got {queries!r}")
        self.width, self.queries, self.anchor_size = width, queries, anchor_size
        self.num_queries, self.query_nms = num_queries, query_nms
        self.input_proj = nn.Linear(dim, width)
        self.decoder = TransformerDecoder(width, depth, num_heads, num_queries if queries == "learned" else 1)
        self.query_pos = nn.Sequential(nn.Linear(2 * width, width), nn.ReLU(), nn.Linear(width, width))
        self.predict = BoxPredictor(width, num_classes + 1)  # shared by every decoder layer
        self.relation = nn.Sequential(nn.Linear(4, width // 2), nn.ReLU(), nn.Linear(width // 2, num_heads))
        relation_out = cast(nn.Linear, self.relation[2])
        nn.init.zeros_(relation_out.weight)
        nn.init.zeros_(relation_out.bias)
        if queries == "learned":
            side = math.ceil(math.sqrt(num_queries))
            cells = [((i % side + 0.5) / side, (i // side + 0.5) / side) for i in range(num_queries)]
            self.anchors = nn.Parameter(torch.logit(torch.tensor([[cx, cy, 0.2, 0.2] for cx, cy in cells])))
        else:
            self.proposal_norm = nn.LayerNorm(width)
            self.propose = BoxPredictor(width, num_classes + 1)

    def token_anchors(self, h: int, w: int) -> torch.Tensor:
        """``(h * w, 4)`` anchor logits: a box of side ``anchor_size`` on each cell's centre."""
        ys, xs = torch.meshgrid((torch.arange(h) + 0.5) / h, (torch.arange(w) + 0.5) / w, indexing="ij")
        side = torch.full((h * w,), self.anchor_size)
        return torch.logit(torch.stack([xs.flatten(), ys.flatten(), side, side], -1))

    def select_queries(self, logits: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
        """Indices ``(B, num_queries)`` of the proposals that become queries: the best-scored
        (max object-class probability) of those that survive class-agnostic NMS, then, if too few
        survive, the best of the rest. ``logits (B, N, K + 1)``, ``boxes (B, N, 4)`` ``(cx, cy, w, h)``."""
        score = logits.detach().softmax(-1)[..., :-1].max(-1).values
        k = min(self.num_queries, score.shape[1])
        if self.query_nms < 1:
            xyxy = box_convert(boxes.detach(), "cxcywh", "xyxy")
            for i in range(len(score)):  # survivors rank above every suppressed proposal (scores are < 1)
                score[i, nms(xyxy[i], score[i], self.query_nms)] += 1
        return score.topk(k, dim=1).indices

    def forward(self, maps: list[torch.Tensor], images: torch.Tensor) -> dict:
        last = maps[-1]
        b, (h, w) = last.shape[0], last.shape[-2:]
        tokens = self.input_proj(map_tokens(last))
        token_pos = sine_pos_2d(h, w, self.width).to(tokens)
        extra = {}
        if self.queries == "tokens":
            anchors = self.token_anchors(h, w).to(tokens).expand(b, -1, -1)
            logits, box = self.propose(self.proposal_norm(tokens), anchors)
            extra["proposals"] = {"logits": logits, "boxes": box.sigmoid()}
            index = self.select_queries(logits, extra["proposals"]["boxes"])
            x = tokens.gather(1, index[..., None].expand(-1, -1, self.width))
            ref = box.detach().gather(1, index[..., None].expand(-1, -1, 4))
        else:
            x, ref = self.decoder.queries.expand(b, -1, -1), self.anchors.expand(b, -1, -1)
        outs = []
        for layer in self.decoder.layers:
            boxes = ref.sigmoid()
            bias = self.relation(box_relations(boxes)).permute(0, 3, 1, 2)  # (B, heads, Q, Q)
            x = layer(x, tokens, self.query_pos(sine_embed(boxes, self.width // 2)), token_pos, bias)
            logits, box = self.predict(self.decoder.norm(x), ref)
            outs.append({"logits": logits, "boxes": box.sigmoid()})
            ref = box.detach()
        return {**outs[-1], "aux": outs[:-1], **extra}
