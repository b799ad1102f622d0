"""What a study is made of and what it measured: a planned run (:class:`RunPlan`), a grid point
(:class:`Cell`), the expanded grid (:class:`Plan`), a run's measurements (:class:`RunRecord`) and the
study's result (:class:`CompareResult`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .axes import CNN_WORDS, VARIANTS, Axis, variant_words
from .config import CompareConfig


@dataclass
class RunPlan:
    """One training run: ``kind`` ("vit" or "cnn"), the registered ``model`` with ``overrides``,
    the shared axes' ``train`` fields, and the ``axes`` values it stands for (a CNN has no ViT-only
    axes, a ViT no CNN-only axis). ``params`` is its trainable parameter count for the data's shape;
    ``teacher`` the key of the CNN run it distils from (planned before it); ``mask_patches`` the patch
    grids its robustness is scored on (a ViT's own; a CNN's, those of the ViTs it meets)."""

    key: str
    kind: str
    model: str
    overrides: dict[str, Any]
    train: dict[str, Any]
    axes: dict[str, Any]
    params: int
    teacher: str | None = None
    mask_patches: list[int] = field(default_factory=list)


@dataclass
class Cell:
    """One grid point: its axis values and the keys of the ViT run and the CNN run it meets."""

    axes: dict[str, Any]
    vit: str
    cnn: str


@dataclass
class Plan:
    """The expanded grid: the axes, every cell, and the distinct runs they need (in run order);
    ``skipped``: each combination of the ViT's axes that cannot be built, ``{"axes", "reason"}`` (see
    :func:`skip_reason`), once for all its seeds, rows and settings."""

    axes: list[Axis]
    cells: list[Cell]
    runs: list[RunPlan]
    skipped: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunRecord:
    """What one training run measured.

    ``gap`` = ``final_train_acc - best_val_acc``: the last epoch's training accuracy (on the
    augmented batches, in training mode) minus the best validation accuracy over the epochs.
    ``val_ece`` is the validation ECE at the best epoch; ``test_acc`` the test accuracy the training
    reports (``None`` without a test split). ``curves`` holds per-epoch ``train_acc``, ``val_acc``,
    ``train_loss``, ``val_loss``. ``train_rows`` is the number of training images actually used.
    ``cost``: what the training cost (trainable and total parameters, optimiser state bytes, seconds per
    step; :attr:`vitlab.engine.loop.FitResult.cost`). ``robustness`` (with ``CompareConfig.robustness``): per
    patch grid, the accuracies of :func:`~vitlab.explain.robustness.robustness` on the test split (validation
    without one).
    """

    key: str
    kind: str
    model: str
    widths: list[int] | None
    axes: dict[str, Any]
    train_rows: int
    params: int
    best_val_acc: float
    best_epoch: int
    final_train_acc: float
    gap: float
    val_ece: float | None
    test_acc: float | None
    seconds: float
    curves: dict[str, list[float]]
    images_per_s: float | None = None
    peak_mb: float | None = None
    agreement: float | None = None
    tome_r: list[int] | None = None
    robustness: list[dict[str, Any]] | None = None
    diverged: bool = False
    train_eval_acc: float | None = None
    permutation: list[dict[str, Any]] | None = None
    cost: dict[str, Any] | None = None

    @property
    def permuted_agreement(self) -> float | None:
        """With ``permute``: the share of held-out predictions that survive shuffled patches, as trained."""
        return None if self.permutation is None else self.permutation[0]["agreement"]

    @property
    def unpositioned_agreement(self) -> float | None:
        """With ``permute``: the same with the ViT's positions removed (as trained for a model without any)."""
        return None if self.permutation is None else self.permutation[-1]["agreement"]

    @property
    def label(self) -> str:
        """``ViT patch 2`` / ``ViT patch 2, window attention`` / ``CNN 39-77-154`` / ``CNN 32-64-64
        (textbook-size plain)``: the model as the tables and plots name it."""
        if self.kind == "vit":
            variants = [variant_words(name, self.axes[name]) for name in VARIANTS if name in self.axes]
            return ", ".join([f"ViT patch {self.axes['patch']}", *variants])
        if self.widths is None:
            raise ValueError(f"CNN run {self.key!r} has no widths: a CNN record always carries its stage widths")
        which = f" ({CNN_WORDS[self.axes['cnn']]})" if "cnn" in self.axes else ""
        return "CNN " + "-".join(map(str, self.widths)) + which

    @property
    def final_val_acc(self) -> float:
        """Validation accuracy at the last epoch (a ``tome`` run's: that of its merged model)."""
        if self.tome_r is not None or self.diverged:
            return self.best_val_acc
        return self.curves["val_acc"][-1]

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "label": self.label,
            "final_val_acc": self.final_val_acc,
            "permuted_agreement": self.permuted_agreement,
            "unpositioned_agreement": self.unpositioned_agreement,
        }


@dataclass
class CompareResult:
    """What :func:`run_compare` returns: the config, the plan, every run's record (by run key),
    the data's description, the study's wall time and the CPU time of its runs and of this process
    outside them; ``execution`` describes the executor; ``files`` lists what was written;
    ``attention`` names the best ViT run and its per-head attention figures (when files are written)."""

    config: CompareConfig
    plan: Plan
    records: dict[str, RunRecord]
    data: dict[str, Any]
    seconds: float
    cpu_seconds: float
    execution: dict[str, Any] = field(default_factory=dict)
    files: dict[str, Path] = field(default_factory=dict)
    attention: dict[str, Any] = field(default_factory=dict)


# progress(done, total, run, record): called as each run's record arrives; done counts from 1.
ProgressFn = Callable[[int, int, RunPlan, RunRecord], None]
