"""The one door from experiments to the training code: everything a comparison needs from the
engine, the tasks and self-supervised pretraining is imported here, and :func:`train_run` and
:func:`pretrain_run` are the only places a comparison trains a model."""

from __future__ import annotations

from typing import Any

from ..data import DataSplits
from ..engine.evaluate import classification_report, predict_logits
from ..engine.measure import forward_costs
from ..tasks import TrainResult, train
from ..tasks.classify import DISTILL_KINDS, RECIPES, TrainConfig
from ..tasks.ssl.pretrain import IMAGE_SETS, METHODS, PretrainConfig, pretrain

__all__ = [
    "DISTILL_KINDS",
    "IMAGE_SETS",
    "METHODS",
    "RECIPES",
    "TrainConfig",
    "TrainResult",
    "classification_report",
    "forward_costs",
    "predict_logits",
    "pretrain_run",
    "train_run",
]


def train_run(config: TrainConfig, splits: DataSplits) -> TrainResult:
    """Train one run of a comparison (silently) on ``splits`` (``train`` seeds every generator from the
    run's own seed before drawing the initial weights)."""
    return train(config, splits)


def pretrain_run(**fields: Any) -> None:
    """Pretrain one encoder without labels: :class:`~vitlab.tasks.ssl.pretrain.PretrainConfig` ``fields``,
    written to ``fields["out_dir"]`` (``pretrain`` seeds from ``fields["seed"]``)."""
    pretrain(PretrainConfig(**fields))
