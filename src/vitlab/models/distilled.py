"""DeiT students (Touvron et al. 2021): a ViT with a distillation token.

A student is a :class:`~vitlab.models.VisionTransformer` built with ``distill_token=True``, e.g.
``build_registered("vit-digits", distill_token=True)``, so a checkpoint rebuilds it from its config alone:

    images -> patch tokens + positions -> [class, registers, distillation token, patches] -> blocks -> norm
      -> head      (the usual pooling, the distillation token left out)   cls logits  (B, K)
      -> head_dist (fc_norm of the distillation token)                   dist logits (B, K)

Training mode returns ``(cls_logits, dist_logits)``, eval mode their mean. The distillation token has
no position (like the class token) and the identity rotation under rotary positions. State-dict
keys: the ViT's plus ``dist_token`` and ``head_dist.*``. The losses are :mod:`vitlab.tasks.distill`'s.
"""

from __future__ import annotations

from ..errors import ConfigError
from .vit import VisionTransformer


def distilled_from(model: VisionTransformer) -> VisionTransformer:
    """A student with ``model``'s config and weights, a new distillation token and head, on ``model``'s
    device and in its dtype (a student's own copy when ``model`` is one)."""
    if not isinstance(model, VisionTransformer):
        raise ConfigError(
            f"a distillation token needs a VisionTransformer student, got {type(model).__name__}: use a vit-* model"
        )
    student = VisionTransformer(model.config, distill_token=True).to(next(model.parameters()))
    student.load_state_dict(model.state_dict(), strict=False)
    return student
