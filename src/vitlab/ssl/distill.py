"""Knowledge distillation (Hinton et al. 2015; DeiT, Touvron et al. 2021).

- :func:`distillation_loss`: ``(1 - alpha) * CE(cls, y) + alpha * D(dist, teacher)``, where ``D`` is
  ``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` (``soft``) or ``CE(student, argmax
  teacher)`` (``hard``).
- :class:`DistilledVisionTransformer`: a ViT with a distillation token after its prefix tokens and
  its own head ``head_dist``. In training mode it returns both heads' logits; in eval mode their
  average ``(B, K)``.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..models.vit import ViTConfig, VisionTransformer

DISTILL_KINDS = ("soft", "hard")


def distillation_loss(student: torch.Tensor, teacher: torch.Tensor, kind: str = "soft",
                      temperature: float = 1.0) -> torch.Tensor:
    """The distillation term for student and teacher logits ``(B, K)`` (teacher not differentiated)."""
    teacher = teacher.detach().float()
    student = student.float()
    if kind == "hard":
        return F.cross_entropy(student, teacher.argmax(dim=1))
    if kind != "soft":
        raise ValueError(f"unknown distillation {kind!r}: choose one of {DISTILL_KINDS}")
    if temperature <= 0:
        raise ValueError(f"distillation temperature must be > 0, got {temperature}")
    t = temperature
    kl = F.kl_div(F.log_softmax(student / t, dim=1), F.log_softmax(teacher / t, dim=1), reduction="batchmean",
                  log_target=True)
    return kl * t * t


class DistilledVisionTransformer(VisionTransformer):
    """A :class:`VisionTransformer` with a DeiT distillation token: images ``(B, C, H, W)`` ->
    ``(cls_logits, dist_logits)`` each ``(B, K)`` in training mode, their mean ``(B, K)`` in eval mode.

    The token (no position, like the class token) sits right after the prefix tokens; the
    class head reads the usual pooled features (the distillation token excluded), ``head_dist``
    reads the distillation token through ``fc_norm``. State-dict keys are the ViT's plus
    ``dist_token`` and ``head_dist.*``.
    """

    def __init__(self, config: ViTConfig | None = None, **overrides: Any) -> None:
        super().__init__(config, **overrides)
        if self.rope is not None:
            raise ValueError("a distillation token would shift rotary positions: use another pos_embed")
        self.dist_token = nn.Parameter(torch.zeros(1, 1, self.embed_dim))
        nn.init.trunc_normal_(self.dist_token, std=0.02)
        self.head_dist = self._new_head(self.num_classes)

    def _new_head(self, num_classes: int) -> nn.Module:
        head = nn.Linear(self.embed_dim, num_classes) if num_classes > 0 else nn.Identity()
        if num_classes > 0:
            nn.init.trunc_normal_(head.weight, std=0.02)
            nn.init.zeros_(head.bias)
        return head

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """Images -> tokens ``(B, R + 1 + N, D)``; the distillation token at index ``R``."""
        x, _ = self.embed(images)
        r = self.num_prefix_tokens
        x = torch.cat([x[:, :r], self.dist_token.expand(x.shape[0], -1, -1), x[:, r:]], dim=1)
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward_heads(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Tokens ``(B, R + 1 + N, D)`` -> ``(cls_logits, dist_logits)``, each ``(B, K)``."""
        r = self.num_prefix_tokens
        cls = self.forward_head(torch.cat([tokens[:, :r], tokens[:, r + 1:]], dim=1))
        return cls, self.head_dist(self.head_drop(self.fc_norm(tokens[:, r])))

    def forward(self, images: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        cls, dist = self.forward_heads(self.forward_features(images))
        return (cls, dist) if self.training else (cls + dist) / 2

    def reset_classifier(self, num_classes: int, pool: str | None = None) -> None:
        super().reset_classifier(num_classes, pool)
        self.head_dist = self._new_head(num_classes).to(self.dist_token.device)

    def no_weight_decay(self) -> set[str]:
        return super().no_weight_decay() | {"dist_token"}


def distilled_from(model: VisionTransformer) -> DistilledVisionTransformer:
    """A distilled ViT with ``model``'s config and weights (new distillation token and head)."""
    if not isinstance(model, VisionTransformer):
        raise ValueError(f"a distillation token needs a VisionTransformer student, got {type(model).__name__}: "
                         f"use a vit-* model")
    student = DistilledVisionTransformer(ViTConfig.from_dict(model.config.to_dict()))
    student.load_state_dict(model.state_dict(), strict=False)
    return student.to(next(model.parameters()).device)
