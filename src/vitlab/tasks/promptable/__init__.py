"""Promptable segmentation (SAM-style) on vitlab's engine. The model is
:mod:`vitlab.models.promptable`'s.

- ``sampling``: training prompts (a point inside an object or its jittered box) and evaluation
  prompts (the object's centre, its box).
- ``losses``: focal + dice on the best of K candidates, MSE of the predicted IoU.
- ``train``: :class:`PromptableTask` on the engine (several prompts per image, the image encoded once),
  :func:`evaluate_promptable`.
- ``predict``: :func:`segment` one image from points / a box, overlays, :func:`promptable_checkpoint`.
"""

from ...models.promptable import PromptableConfig, PromptableModel
from .predict import overlay_prompt, predict_file, promptable_checkpoint, segment
from .train import (
    PromptableTask,
    PromptableTrainConfig,
    evaluate_promptable,
)

__all__ = [
    "PromptableConfig",
    "PromptableModel",
    "PromptableTask",
    "PromptableTrainConfig",
    "evaluate_promptable",
    "overlay_prompt",
    "predict_file",
    "promptable_checkpoint",
    "segment",
]
