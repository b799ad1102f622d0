"""What differs between trainings: the :class:`Task` the engine's loop (:func:`vitlab.engine.loop.fit`) trains.

A task turns batches into a loss and says what a checkpoint holds: its model, how many examples an
epoch permutes, a batch of them, the step's loss and metric sums, validation and test metrics, the module
a checkpoint delivers, and its own state for exact resume. Subclasses set the attributes and override the
methods; the engine owns everything else (seeding, device, DDP, optimiser, schedule, EMA, checkpoints).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..data import DataConfig
from .config import RunConfig
from .distributed import DistEnv
from .optim import build_optimizer

if TYPE_CHECKING:
    from ..runs import RunDir


class Task:
    """What differs between trainings. Subclasses set the attributes and override the methods.

    ``model`` is the module the optimiser trains (a classifier, an MAE wrapper, a DINO student);
    ``run_kind`` names the run (``classify``, ``mae``, ...); ``checkpoint_kind`` the checkpoint
    (``classifier``, ``encoder``, ...); ``monitor`` the validation metric whose maximum picks
    ``best/`` (``None``: no per-epoch validation, ``best`` is the last epoch).
    """

    model: nn.Module
    run_kind: str = "classify"
    checkpoint_kind: str = "classifier"
    monitor: str | None = None
    drop_last: bool = False

    def prepare(self, env: DistEnv, amp: bool) -> None:
        """Move data and modules to ``env.device`` (called once, before anything else)."""
        self.env, self.amp = env, amp
        self.model.to(env.device)

    def train_size(self) -> int:
        """Number of training examples (what an epoch permutes)."""
        raise NotImplementedError

    def start_epoch(self, epoch: int, seed: int) -> None:
        """Reseed the task's own randomness (augmentation, masks, crops) for ``epoch``."""

    def generators(self) -> dict[str, torch.Generator]:
        """The task's own random generators, by name, whose states a mid-epoch checkpoint keeps (those
        :meth:`start_epoch` seeds). The default: the task's ``torch.Generator`` attributes."""
        return {name: value for name, value in vars(self).items() if isinstance(value, torch.Generator)}

    def batch(self, index: torch.Tensor) -> Any:
        """The training batch of examples ``index`` ``(B,)``."""
        raise NotImplementedError

    def batches(self, index: torch.Tensor, batch_size: int) -> Iterator[Any]:
        """This epoch's training batches: examples ``index`` ``(N,)`` in consecutive chunks of
        ``batch_size``. The default indexes :meth:`batch`; a task whose data streams from files
        yields from a ``DataLoader`` whose workers decode ahead of the step."""
        for start in range(0, len(index), batch_size):
            yield self.batch(index[start : start + batch_size])

    def step(self, net: nn.Module, batch: Any, epoch: int) -> tuple[torch.Tensor, dict[str, torch.Tensor], int]:
        """``(mean loss, {metric: sum over the batch}, batch size)``; ``net`` is the (DDP-wrapped) model."""
        raise NotImplementedError

    def after_step(self, step: int, total_steps: int) -> None:
        """After each optimiser step (a momentum teacher's update)."""

    def parameters_to_optimise(self, config: RunConfig) -> torch.optim.Optimizer:
        """The optimiser over :attr:`model` (a task may group parameters, e.g. layer-wise decay)."""
        return build_optimizer(self.model, config.optimizer, config.lr, config.weight_decay)

    def validate(self, model: nn.Module) -> dict[str, float]:
        """Validation metrics of ``model`` (the EMA when on), each prefixed ``val_``."""
        return {}

    def test(self, model: nn.Module) -> dict[str, float] | None:
        """Test metrics of the model chosen by validation, or ``None`` without a test split."""
        return None

    def deliverable(self, model: nn.Module) -> nn.Module:
        """The module a checkpoint holds (an MAE run delivers its encoder)."""
        return model

    def data_config(self) -> DataConfig:
        """What a user of the checkpoint needs to feed it: the one object that builds its input."""
        raise NotImplementedError

    def state_dict(self) -> dict[str, Any]:
        """The task's own training state (a momentum teacher, a centre), for exact resume."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass

    def finish(self, run_dir: RunDir, model: nn.Module) -> None:
        """Write the task's own figures into the run folder at the end (main process only)."""

    def skipped(self) -> dict[str, str]:
        """Inputs the task could not read and skipped, ``{name: why}`` (the run's summary names them)."""
        return {}

    def notes(self) -> list[str]:
        """Lines for the reporter when the run ends (e.g. how many unreadable images were skipped)."""
        return []
