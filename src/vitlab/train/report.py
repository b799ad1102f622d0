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

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        """Before the first epoch; ``start_epoch`` > 0 when resuming."""

    def step(self, epoch: int, step: int, loss: float, acc: float, images_per_s: float) -> None:
        """Running means over the epoch so far (``step`` counts from 1)."""

    def epoch(self, record: dict[str, Any]) -> None:
        """One finished epoch's metrics (a row of ``metrics.jsonl``)."""

    def close(self) -> None:
        """After the last epoch."""


def format_record(record: dict[str, Any], epochs: int) -> str:
    """One line for an epoch record: ``epoch 3/30  train loss .. acc ..  val loss .. acc .. ece ..  img/s  s``."""
    line = (f"epoch {record['epoch']}/{epochs}  train loss {record['train_loss']:.4f} "
            f"acc {record['train_acc']:.4f}")
    if record.get("val_acc") is not None:
        line += f"  val loss {record['val_loss']:.4f} acc {record['val_acc']:.4f} ece {record['val_ece']:.4f}"
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

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        self.epochs, self.steps = epochs, steps_per_epoch

    def step(self, epoch: int, step: int, loss: float, acc: float, images_per_s: float) -> None:
        if self.bar is None:
            self.bar = tqdm(total=self.steps, desc=f"epoch {epoch}/{self.epochs}", leave=False,
                            disable=self.disable, file=sys.stderr, dynamic_ncols=True)
        self.bar.update(step - self.bar.n)
        self.bar.set_postfix(loss=f"{loss:.4f}", acc=f"{acc:.4f}", img_s=f"{images_per_s:,.0f}", refresh=False)

    def epoch(self, record: dict[str, Any]) -> None:
        self.close()
        tqdm.write(format_record(record, self.epochs), file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
