"""The one training engine: ``fit(task, config, run_dir) -> FitResult``, and what it is made of.

- ``loop``: :func:`fit`, seeding, divergence check; ``task``: :class:`Task` (what differs between trainings).
- ``config``: :class:`RunConfig`, the fields every run shares, each with its range.
- ``optim``: weight-decay groups, layer-wise decay, warmup + cosine schedule, weight EMA.
- ``distributed``: torchrun environment, gloo / nccl process groups, all-reduce.
- ``metrics``: accuracy, NLL, ECE, reliability, confusion, temperature fitting.
- ``evaluate``: logits and reports of a model on a dataset; ``figures``: their plots.
- ``measure``: timing and peak memory; ``report``: progress reporters (silent base, tqdm bar).
"""

from .config import RunConfig
from .evaluate import classification_report, evaluate_model, predict_logits
from .loop import FitResult, epoch_seed, fit, seed_everything
from .metrics import accuracy, confusion_matrix, ece, fit_temperature, nll, per_class_accuracy, reliability
from .optim import ModelEma, build_optimizer, build_scheduler, layer_decay_groups, param_groups
from .report import Reporter, TqdmReporter
from .task import Task

__all__ = [
    "FitResult",
    "ModelEma",
    "Reporter",
    "RunConfig",
    "Task",
    "TqdmReporter",
    "accuracy",
    "build_optimizer",
    "build_scheduler",
    "classification_report",
    "confusion_matrix",
    "ece",
    "epoch_seed",
    "evaluate_model",
    "fit",
    "fit_temperature",
    "layer_decay_groups",
    "nll",
    "param_groups",
    "per_class_accuracy",
    "predict_logits",
    "reliability",
    "seed_everything",
]
