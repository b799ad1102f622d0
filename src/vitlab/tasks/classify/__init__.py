"""Classification (and DeiT distillation): :class:`TrainConfig` and its recipes, the engine's
:class:`ClassificationTask`, the run (:func:`train`), :func:`evaluate_checkpoint`, and
:func:`classify_files` for ``vitlab predict``."""

from .predict import Prediction, classify_files, image_files
from .retrain import checkpoint_train_config, retrainer, train_copy
from .task import DISTILL_KINDS, RECIPES, ClassificationTask, TrainConfig, build_model, distillation_loss
from .train import SPLITS, TrainResult, build_student, evaluate_checkpoint, load_splits, train

__all__ = [
    "checkpoint_train_config",
    "retrainer",
    "train_copy",
    "DISTILL_KINDS",
    "RECIPES",
    "SPLITS",
    "ClassificationTask",
    "Prediction",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "build_student",
    "classify_files",
    "distillation_loss",
    "evaluate_checkpoint",
    "image_files",
    "load_splits",
    "train",
]
