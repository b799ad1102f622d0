"""Runs in one call, on the engine and the run folder: ``train`` (classification and distillation),
``evaluate_checkpoint``, and ``classify_files`` for `vitlab predict`. Self-supervised runs are
:func:`vitlab.tasks.ssl.pretrain`; dense ones :func:`vitlab.tasks.dense.train_dense`."""

from .classify.predict import Prediction, classify_files, image_files
from .classify.train import SPLITS, TrainResult, build_student, evaluate_checkpoint, load_splits, train

__all__ = [
    "SPLITS",
    "Prediction",
    "TrainResult",
    "build_student",
    "classify_files",
    "evaluate_checkpoint",
    "image_files",
    "load_splits",
    "train",
]
