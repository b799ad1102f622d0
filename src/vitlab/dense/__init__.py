"""Dense prediction on ViT features: segmentation heads (linear per patch, convolutional decoder,
query mask classification) and DETR-style detection.

- ``model``: :class:`DenseConfig`, :class:`DenseModel` (backbone ``forward_intermediates`` + head).
- ``heads``: the heads; ``decoder``: cross-attention transformer decoder.
- ``matching``: Hungarian matching and its costs; ``losses``: set losses; ``metrics``: IoU, COCO mAP.
- ``train``: :func:`train_dense`, :func:`evaluate_dense_checkpoint`; ``predict``: masks, boxes, overlays.
"""
from .matching import hungarian_match
from .model import DenseConfig, DenseModel
from .predict import is_dense_checkpoint, load_dense, predict_boxes, predict_file, predict_masks
from .train import (DenseResult, DenseTrainConfig, dense_train_config, evaluate_dense, evaluate_dense_checkpoint,
                    train_dense)

__all__ = ["DenseConfig", "DenseModel", "DenseResult", "DenseTrainConfig", "dense_train_config", "evaluate_dense",
           "evaluate_dense_checkpoint", "hungarian_match", "is_dense_checkpoint", "load_dense", "predict_boxes",
           "predict_file", "predict_masks", "train_dense"]
