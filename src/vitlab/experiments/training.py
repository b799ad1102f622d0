"""The one door from experiments to the training code: everything a comparison needs from the
engine, the tasks and self-supervised pretraining is imported here, and :func:`train_run`,
:func:`pretrain_run` and :func:`dense_run` are the only places a comparison trains a model."""

from __future__ import annotations

from typing import Any

from ..data import DataSplits
from ..data.dense import DenseSplits
from ..engine.evaluate import classification_report, predict_logits
from ..engine.measure import forward_costs
from ..tasks import RunResult, run
from ..tasks.classify import DISTILL_KINDS, RECIPES, TrainConfig
from ..tasks.dense.train import DenseTrainConfig
from ..tasks.ssl.pretrain import IMAGE_SETS, METHODS, PretrainConfig

__all__ = [
    "DISTILL_KINDS",
    "IMAGE_SETS",
    "METHODS",
    "RECIPES",
    "DenseTrainConfig",
    "TrainConfig",
    "RunResult",
    "classification_report",
    "dense_run",
    "forward_costs",
    "predict_logits",
    "pretrain_run",
    "train_run",
]


def train_run(config: TrainConfig, splits: DataSplits) -> RunResult:
    """Train one run of a comparison (silently) on ``splits`` (the run seeds every generator from the
    run's own seed before drawing the initial weights)."""
    return run("classify", config, splits)


def pretrain_run(**fields: Any) -> None:
    """Pretrain one encoder without labels: :class:`~vitlab.tasks.ssl.pretrain.PretrainConfig` ``fields``,
    written to ``fields["out_dir"]`` (the run seeds from ``fields["seed"]``)."""
    run("pretrain", PretrainConfig(**fields))


def dense_run(config: DenseTrainConfig, splits: DenseSplits) -> RunResult:
    """Train one dense head of a comparison on ``splits`` (the run seeds from ``config.seed``)."""
    return run(config.task, config, splits)
