"""Dense prediction on ViT features: segmentation (linear per patch, convolutional decoder, query
mask classification) and DETR-style detection. The models are :mod:`vitlab.models.dense`'s.

- ``matching``: Hungarian matching and its costs; ``losses``: set losses; ``metrics``: IoU, COCO mAP.
- ``train``: :class:`DenseTask` on the engine, :func:`evaluate_dense_checkpoint`.
- ``predict``: masks, boxes, overlays, and :func:`dense_checkpoint` (a ``segmenter`` / ``detector``
  checkpoint through :func:`vitlab.runs.load_checkpoint`).
"""

from ...models.dense import DenseConfig, DenseModel
from .matching import hungarian_match
from .predict import dense_checkpoint, overlay, predict_boxes, predict_file, predict_masks
from .train import DenseTask, DenseTrainConfig, evaluate_dense_checkpoint

__all__ = [
    "DenseConfig",
    "DenseModel",
    "DenseTask",
    "DenseTrainConfig",
    "dense_checkpoint",
    "evaluate_dense_checkpoint",
    "hungarian_match",
    "overlay",
    "predict_boxes",
    "predict_file",
    "predict_masks",
]
