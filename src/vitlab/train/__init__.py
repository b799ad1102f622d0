"""Training and evaluation: ``train(TrainConfig) -> TrainResult``, ``evaluate_checkpoint``, metrics.

- ``trainer``: :class:`TrainConfig`, :data:`RECIPES`, :func:`train` (single process or DDP under torchrun).
- ``optim``: weight-decay parameter groups, warmup + cosine schedule, weight EMA.
- ``checkpoint``: atomic safetensors weights + ``state.pt`` (loaded with ``weights_only=True``).
- ``distributed``: torchrun environment, gloo / nccl process groups, all-reduce.
- ``metrics``: accuracy, NLL, ECE, reliability, confusion, temperature fitting.
- ``evaluate``: ``evaluate_model`` / ``evaluate_checkpoint``; ``figures``: their plots.
- ``report``: progress reporters (silent base, tqdm bar).
"""
from .checkpoint import Checkpoint, load_checkpoint
from .evaluate import classification_report, evaluate_checkpoint, evaluate_model, predict_logits
from .metrics import accuracy, confusion_matrix, ece, fit_temperature, nll, per_class_accuracy, reliability
from .optim import ModelEma, build_optimizer, build_scheduler, param_groups
from .report import Reporter, TqdmReporter
from .trainer import RECIPES, TrainConfig, TrainResult, build_model, train

__all__ = ["Checkpoint", "ModelEma", "RECIPES", "Reporter", "TqdmReporter", "TrainConfig", "TrainResult",
           "accuracy", "build_model", "build_optimizer", "build_scheduler", "classification_report",
           "confusion_matrix", "ece", "evaluate_checkpoint", "evaluate_model", "fit_temperature",
           "load_checkpoint", "nll", "param_groups", "per_class_accuracy", "predict_logits", "reliability",
           "train"]
