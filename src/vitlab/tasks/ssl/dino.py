"""DINO (Caron et al. 2021): self-distillation with no labels.

A student and a momentum teacher (the EMA of the student) share an architecture: backbone
features ``(B, D)`` -> :class:`DINOHead` -> ``(B, K)`` scores. The teacher sees the global crops,
the student every crop (global and local); the loss is the cross-entropy between the teacher's
centred, sharpened softmax and the student's softmax over all pairs of different crops::

    P_t = softmax((g_t - c) / tau_t),  P_s = softmax(g_s / tau_s),  L = -sum P_t log P_s
    c  <- m c + (1 - m) mean(g_t)              (centring, :class:`Centre`)
    theta_t <- l theta_t + (1 - l) theta_s     (:func:`ema_update_`)

Collapse monitors: the mean entropy of ``P_t`` and the mean ``KL(P_t || P_s)``; both go to 0
when every image gets the same one-hot output, the entropy to ``log K`` when outputs are uniform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from ...errors import ConfigError


class DINOHead(nn.Module):
    """Features ``(B, D)`` -> MLP -> L2-normalised bottleneck -> weight-normalised linear ``(B, K)``."""

    def __init__(self, in_dim: int, out_dim: int = 256, hidden_dim: int = 256, bottleneck_dim: int = 64) -> None:
        super().__init__()
        self.mlp = nn.Sequential(
            nn.Linear(in_dim, hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, hidden_dim),
            nn.GELU(),
            nn.Linear(hidden_dim, bottleneck_dim),
        )
        for m in self.mlp.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)
        self.last = nn.utils.parametrizations.weight_norm(nn.Linear(bottleneck_dim, out_dim, bias=False))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(F.normalize(self.mlp(x), dim=-1))


class DINONet(nn.Module):
    """A backbone with ``forward_head(forward_features(x), pre_logits=True)`` (a vitlab ViT) and a
    :class:`DINOHead`: images ``(B, C, H, W)`` -> scores ``(B, K)``."""

    def __init__(self, backbone: nn.Module, head: DINOHead) -> None:
        super().__init__()
        self.backbone, self.head = backbone, head

    def no_weight_decay(self) -> set[str]:
        backbone: Any = self.backbone
        inner = backbone.no_weight_decay() if hasattr(backbone, "no_weight_decay") else set()
        return {f"backbone.{n}" for n in inner}

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        backbone: Any = self.backbone
        return self.head(backbone.forward_head(backbone.forward_features(images), pre_logits=True))


@torch.no_grad()
def ema_update_(teacher: nn.Module, student: nn.Module, momentum: float) -> None:
    """``teacher <- momentum * teacher + (1 - momentum) * student``, parameter by parameter."""
    if not 0.0 <= momentum <= 1.0:
        raise ConfigError(f"momentum must lie in [0, 1], got {momentum}")
    for t, s in zip(teacher.parameters(), student.parameters()):
        t.mul_(momentum).add_(s.detach(), alpha=1.0 - momentum)


class Centre(nn.Module):
    """The running centre ``c (K,)`` of teacher outputs.

    ``momentum=m``: ``c <- m c + (1 - m) mean(batch)`` (DINO). ``momentum=None``: ``c`` is the exact
    mean of every output seen so far (a count-weighted running mean).
    """

    centre: torch.Tensor
    count: torch.Tensor

    def __init__(self, dim: int, momentum: float | None = 0.9) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("centre", torch.zeros(dim))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, outputs: torch.Tensor) -> None:
        """Fold teacher outputs ``(B, K)`` into the centre."""
        batch_mean = outputs.float().mean(dim=0)
        n = outputs.shape[0]
        if self.momentum is None:
            weight = n / (self.count.item() + n)
            self.centre.add_(weight * (batch_mean - self.centre))
        else:
            self.centre.mul_(self.momentum).add_(batch_mean, alpha=1.0 - self.momentum)
        self.count += n


def teacher_temperature(epoch: int, warmup_epochs: int, start: float = 0.04, end: float = 0.07) -> float:
    """Linear warmup of the teacher temperature from ``start`` to ``end`` over ``warmup_epochs``."""
    if epoch >= warmup_epochs:
        return end
    return start + (end - start) * epoch / max(1, warmup_epochs)


def cosine_momentum(step: int, total: int, base: float = 0.996) -> float:
    """Teacher momentum rising from ``base`` to 1 on a cosine over ``total`` steps."""
    return 1.0 - (1.0 - base) * (math.cos(math.pi * min(step, total) / max(1, total)) + 1.0) / 2.0


@dataclass
class DINOStats:
    """A step's loss and collapse monitors (see module docstring)."""

    loss: torch.Tensor
    teacher_entropy: torch.Tensor
    teacher_student_kl: torch.Tensor


def dino_loss(
    student_out: list[torch.Tensor],
    teacher_out: list[torch.Tensor],
    centre: Centre,
    student_temp: float,
    teacher_temp: float,
) -> DINOStats:
    """Cross-entropy of sharpened, centred teacher crops against every other student crop.

    ``student_out``: one ``(B, K)`` per crop, the global crops first; ``teacher_out``: one per
    global crop. Updates ``centre`` with the teacher outputs afterwards.
    """
    teacher_p = [F.softmax((t.detach().float() - centre.centre) / teacher_temp, dim=-1) for t in teacher_out]
    student_logp = [F.log_softmax(s.float() / student_temp, dim=-1) for s in student_out]
    total: torch.Tensor | float = 0.0
    kl: torch.Tensor | float = 0.0
    pairs = 0
    for i, p in enumerate(teacher_p):
        for j, logq in enumerate(student_logp):
            if i == j:
                kl = kl + (p * (p.clamp_min(1e-12).log() - logq)).sum(-1).mean().detach()
                continue
            total = total + (-p * logq).sum(-1).mean()
            pairs += 1
    if not isinstance(total, torch.Tensor) or not isinstance(kl, torch.Tensor):
        raise ConfigError(
            f"dino_loss needs the teacher's crops first among the student's and one crop more, got "
            f"{len(teacher_out)} teacher and {len(student_out)} student crops: pass more student crops"
        )
    entropies = sum(-(p * p.clamp_min(1e-12).log()).sum(-1).mean() for p in teacher_p)
    entropy = cast(torch.Tensor, entropies) / len(teacher_p)
    centre.update(torch.cat(teacher_out))
    return DINOStats(total / pairs, entropy.detach(), kl / len(teacher_p))
