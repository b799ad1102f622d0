"""Classification (and DeiT distillation): :class:`TrainConfig` and its recipes, the engine's
:class:`ClassificationTask`, the engine task of a run (:func:`build_task`), :func:`evaluate_checkpoint`, and
:func:`classify_files` for ``vitlab predict``."""

from .predict import Prediction, classify_files, image_files
from .retrain import checkpoint_train_config, retrainer, train_copy
from .task import DISTILL_KINDS, RECIPES, ClassificationTask, TrainConfig, build_model, distillation_loss
from .train import SPLITS, build_student, build_task, evaluate_checkpoint, load_splits

__all__ = [
    "DISTILL_KINDS",
    "RECIPES",
    "SPLITS",
    "ClassificationTask",
    "Prediction",
    "TrainConfig",
    "build_model",
    "build_student",
    "build_task",
    "checkpoint_train_config",
    "classify_files",
    "distillation_loss",
    "evaluate_checkpoint",
    "image_files",
    "load_splits",
    "retrainer",
    "train_copy",
]
