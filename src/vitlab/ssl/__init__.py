"""Self-supervised pretraining, distillation and frozen-feature evaluation.

- ``masking``: random patch masking that keeps ``round(N (1 - ratio))`` tokens and restores order.
- ``mae``: masked autoencoder around a vitlab ViT (encoder on visible tokens, light decoder).
- ``dino``: projection head, centring, momentum teacher, the DINO loss and collapse monitors.
- ``crops``: batched random resized crops, DINO's multi-crop.
- ``distill``: soft / hard distillation losses and the DeiT distillation-token ViT.
- ``finetune``: loading pretrained weights, layer-wise learning-rate decay.
- ``probe``: linear probe and kNN on frozen features.
- ``pretrain``: ``pretrain(PretrainConfig) -> PretrainResult`` (MAE or DINO runs).

Scratch vs pretrained vs distilled on one labelled budget is a comparison study:
``vitlab compare --pretrain none,mae,dino --distill none,cnn`` (:mod:`vitlab.experiments.compare`).
"""
from .distill import DISTILL_KINDS, DistilledVisionTransformer, distillation_loss, distilled_from
from .dino import Centre, DINOHead, dino_loss, ema_update_
from .finetune import build_finetune_optimizer, layer_decay_groups, load_pretrained
from .mae import MAEConfig, MaskedAutoencoder, mae_loss
from .masking import Masking, random_masking
from .pretrain import PretrainConfig, PretrainResult, pretrain
from .probe import extract_features, knn_accuracy, linear_probe, probe_checkpoint, probe_model

__all__ = ["Centre", "DINOHead", "DISTILL_KINDS", "DistilledVisionTransformer", "MAEConfig", "Masking",
           "MaskedAutoencoder", "PretrainConfig", "PretrainResult", "build_finetune_optimizer", "dino_loss",
           "distillation_loss", "distilled_from", "ema_update_", "extract_features", "knn_accuracy",
           "layer_decay_groups", "linear_probe", "load_pretrained", "mae_loss", "pretrain", "probe_checkpoint",
           "probe_model", "random_masking"]
