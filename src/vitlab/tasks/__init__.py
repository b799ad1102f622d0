"""Runs in one call, on the engine and the run folder: ``train`` (classification and distillation)
and ``evaluate_checkpoint``. Self-supervised runs are :func:`vitlab.ssl.pretrain`; dense ones
:func:`vitlab.dense.train_dense`."""
from .classify import SPLITS, TrainResult, build_student, evaluate_checkpoint, load_splits, train

__all__ = ["SPLITS", "TrainResult", "build_student", "evaluate_checkpoint", "load_splits", "train"]
