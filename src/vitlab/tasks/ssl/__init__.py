"""Self-supervised pretraining (MAE, DINO) and frozen-feature evaluation.

- ``masking``: random patch masking that keeps ``round(N (1 - ratio))`` tokens and restores order.
- ``mae``: masked autoencoder around a vitlab ViT (encoder on visible tokens, light decoder).
- ``dino``: projection head, centring, momentum teacher, the DINO loss and collapse monitors.
- ``crops``: batched random resized crops, DINO's multi-crop.
- ``probe``: linear probe and kNN on frozen features.
- ``pretrain``: :class:`PretrainConfig`, :class:`MAETask` and :class:`DINOTask`
  on the engine (:func:`vitlab.engine.fit`), delivering an ``encoder`` checkpoint.

Scratch vs pretrained vs distilled on one labelled budget is a comparison study:
``vitlab compare --pretrain none,mae,dino --distill none,cnn`` (:mod:`vitlab.experiments.compare`).
"""

from .dino import Centre, DINOHead, dino_loss, ema_update_
from .mae import MAEConfig, MaskedAutoencoder, mae_loss
from .masking import Masking, random_masking
from .pretrain import DINOTask, MAETask, PretrainConfig
from .probe import extract_features, knn_accuracy, linear_probe, probe_checkpoint, probe_model

__all__ = [
    "Centre",
    "DINOHead",
    "DINOTask",
    "MAEConfig",
    "MAETask",
    "Masking",
    "MaskedAutoencoder",
    "PretrainConfig",
    "dino_loss",
    "ema_update_",
    "extract_features",
    "knn_accuracy",
    "linear_probe",
    "mae_loss",
    "probe_checkpoint",
    "probe_model",
    "random_masking",
]
