"""The one result of every training: :class:`RunResult` (what :func:`vitlab.tasks.run` returns)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from ..engine import RunConfig


@dataclass
class RunResult:
    """What :func:`run` returns, for every task.

    ``model`` is the deliverable of the weights chosen by validation (the last epoch's for a task that
    validates only at the end or not at all), unwrapped, in eval mode; ``val`` the chosen epoch's
    validation figures without their ``val_`` prefix; ``test`` the test figures measured on ``model``
    (None without a test split); ``history`` the engine's epoch records; ``seconds`` the epochs' wall
    time; ``params`` the trainable parameters of the deliverable; ``cost`` what the training cost
    (:attr:`vitlab.engine.loop.FitResult.cost`); ``checkpoints`` the files the run
    folder holds (``best``, ``last``); ``skipped`` the inputs the task could not read."""

    task: str
    config: RunConfig
    model: nn.Module
    history: list[dict[str, Any]]
    val: dict[str, Any]
    test: dict[str, Any] | None
    best_epoch: int
    seconds: float
    params: int
    checkpoints: dict[str, Path] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)

    @property
    def checkpoint(self) -> Path | None:
        """The checkpoint the run hands on (``best/``; the last epoch's for a run without validation)."""
        return self.checkpoints.get("best")

    @property
    def last(self) -> dict[str, Any]:
        """The last epoch's record (``{}`` when none ran)."""
        return self.history[-1] if self.history else {}

    @property
    def best_val_acc(self) -> float:
        """Validation accuracy of the chosen epoch (NaN for a task that does not measure one)."""
        return float(self.val.get("acc", math.nan))

    @property
    def train_acc(self) -> float:
        """Training accuracy of the last epoch (NaN for a task that does not measure one)."""
        return float(self.last.get("train_acc", math.nan))


__all__ = ["RunResult"]
