"""How a training run reports progress: a silent base class and a tqdm progress bar.

The trainer calls ``start`` once, ``step`` every ``every`` optimizer steps and at the end of each
epoch (the only moments it reads the running loss / accuracy from the device; ``every = 0``: never),
``epoch`` after each epoch, and ``close`` at the end.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm


class Reporter:
    """Receives progress; does nothing. Subclass to print, log or plot."""

    every: int = 0

    def note(self, message: str) -> None:
        """A line about the run before it starts (how its data is read, files indexed so far)."""

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        """Before the first epoch; ``start_epoch`` > 0 when resuming."""

    def step(self, epoch: int, step: int, running: dict[str, float], images_per_s: float) -> None:
        """Running means over the epoch so far (``{"loss": ..., "acc": ...}``; ``step`` counts from 1)."""

    def epoch(self, record: dict[str, Any]) -> None:
        """One finished epoch's metrics (a row of ``metrics.jsonl``)."""

    def close(self) -> None:
        """After the last epoch."""


def _metrics(record: dict[str, Any], prefix: str) -> str:
    return " ".join(
        f"{k[len(prefix) :]} {v:.4f}" for k, v in record.items() if k.startswith(prefix) and isinstance(v, float)
    )


def format_record(record: dict[str, Any], epochs: int) -> str:
    """One line for an epoch record: ``epoch 3/30  train loss .. acc ..  val loss .. acc .. ece ..  img/s  s``."""
    line = f"epoch {record['epoch']}/{epochs}  train {_metrics(record, 'train_')}"
    if any(k.startswith("val_") for k in record):
        line += f"  val {_metrics(record, 'val_')}"
    return line + f"  {record['images_per_s']:,.0f} img/s  {record['seconds']:.1f}s"


class TqdmReporter(Reporter):
    """A progress bar per epoch (loss, accuracy, images/s) and a summary line per epoch.

    ``disable=None`` turns the bar off when stderr is not a terminal; summaries always print.
    """

    def __init__(self, disable: bool | None = None, every: int = 10) -> None:
        self.disable = disable
        self.every = every
        self.bar: tqdm | None = None
        self.epochs = self.steps = 0

    def note(self, message: str) -> None:
        if not self.disable:
            print(message, file=sys.stderr, flush=True)

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        self.epochs, self.steps = epochs, steps_per_epoch

    def step(self, epoch: int, step: int, running: dict[str, float], images_per_s: float) -> None:
        if self.bar is None:
            self.bar = tqdm(
                total=self.steps,
                desc=f"epoch {epoch}/{self.epochs}",
                leave=False,
                disable=self.disable,
                file=sys.stderr,
                dynamic_ncols=True,
            )
        self.bar.update(step - self.bar.n)
        self.bar.set_postfix(**{k: f"{v:.4f}" for k, v in running.items()}, img_s=f"{images_per_s:,.0f}", refresh=False)

    def epoch(self, record: dict[str, Any]) -> None:
        self.close()
        tqdm.write(format_record(record, self.epochs), file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
