"""Runs in one call, on the engine and the run folder: ``train`` (classification and distillation),
``evaluate_checkpoint``, and ``classify_files`` for `vitlab predict`. Self-supervised runs are
:func:`vitlab.ssl.pretrain`; dense ones :func:`vitlab.dense.train_dense`."""

from .classify import SPLITS, TrainResult, build_student, evaluate_checkpoint, load_splits, train
from .predict import Prediction, classify_files, image_files

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
