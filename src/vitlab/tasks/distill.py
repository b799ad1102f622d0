"""Knowledge distillation (Hinton et al. 2015; DeiT, Touvron et al. 2021).

- :func:`distillation_loss`: ``(1 - alpha) * CE(cls, y) + alpha * D(dist, teacher)``, where ``D`` is
  ``T^2 * KL(softmax(teacher / T) || softmax(student / T))`` (``soft``) or ``CE(student, argmax
  teacher)`` (``hard``).

The student, a ViT with a distillation token and its own head, is built by the models layer:
``create_model(name, distill_token=True)`` or :func:`vitlab.models.distilled.distilled_from`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..errors import ConfigError

DISTILL_KINDS = ("soft", "hard")


def distillation_loss(
    student: torch.Tensor, teacher: torch.Tensor, kind: str = "soft", temperature: float = 1.0
) -> torch.Tensor:
    """The distillation term for student and teacher logits ``(B, K)`` (teacher not differentiated)."""
    teacher = teacher.detach().float()
    student = student.float()
    if kind == "hard":
        return F.cross_entropy(student, teacher.argmax(dim=1))
    if kind != "soft":
        raise ConfigError(f"unknown distillation {kind!r}: choose one of {DISTILL_KINDS}")
    if temperature <= 0:
        raise ConfigError(f"distillation temperature must be > 0, got {temperature}")
    t = temperature
    kl = F.kl_div(
        F.log_softmax(student / t, dim=1), F.log_softmax(teacher / t, dim=1), reduction="batchmean", log_target=True
    )
    return kl * t * t
