"""How a training run reports progress: a silent base class and a progress bar that is a widget in a
notebook, a bar in a terminal and plain lines on a pipe.

The trainer calls ``start`` once, ``step`` every ``every`` optimizer steps and at the end of each
epoch (the only moments it reads the running loss / accuracy from the device; ``every = 0``: never),
``epoch`` after each epoch, and ``close`` at the end.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm.auto import tqdm
from tqdm.autonotebook import tqdm as _chosen  # the bar tqdm.auto chose: the notebook's, or the terminal's


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


def _duration(seconds: float) -> str:
    """``42 s``, ``7 min``, ``2.5 h``."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def estimate_line(epochs: int, steps_per_epoch: int, steps_done: int, seconds: float, images_per_s: float) -> str:
    """The whole run's rough time from its first ``steps_done`` steps, which took ``seconds``: ``about 4 min
    for 3 epochs x 7 steps (~2.3 img/s, measured on the first 2 steps; validation not counted)``."""
    total = epochs * steps_per_epoch * seconds / max(steps_done, 1)
    return (
        f"about {_duration(total)} for {epochs} epoch{'s' * (epochs != 1)} x {steps_per_epoch} steps "
        f"(~{images_per_s:,.1f} img/s, measured on the first {steps_done} step{'s' * (steps_done != 1)}; "
        "validation not counted)"
    )


def step_line(epoch: int, epochs: int, step: int, steps: int, running: dict[str, float], images_per_s: float) -> str:
    """One line of progress within an epoch: ``epoch 1/3  step 40/100  loss 1.2034 acc 0.5100  2.3 img/s``."""
    metrics = " ".join(f"{k} {v:.4f}" for k, v in running.items())
    return f"epoch {epoch}/{epochs}  step {step}/{steps}  {metrics}  {images_per_s:,.1f} img/s"


def _bar_shows(stream: Any) -> bool:
    """Whether a bar on ``stream`` is seen: a notebook widget (``tqdm.auto`` chose the notebook bar) or a
    terminal; otherwise (a pipe, a log file) progress is written as lines."""
    return _chosen.__module__ == "tqdm.notebook" or bool(getattr(stream, "isatty", lambda: False)())


class TqdmReporter(Reporter):
    """Progress: a bar per epoch (loss, accuracy, images/s) where one is seen (a notebook widget or a
    terminal), else a line at the first step and then every ``line_seconds``; one estimate of the run's time
    after its first steps; a summary line per epoch.

    ``disable=True`` (``--quiet``) turns bars, lines and the estimate off; summaries always print.
    """

    def __init__(self, disable: bool | None = None, every: int = 1, line_seconds: float = 20.0) -> None:
        self.disable = disable
        self.lines = not disable and not _bar_shows(sys.stderr)
        self.every = every
        self.line_seconds = line_seconds
        self.bar: tqdm | None = None
        self.epochs = self.steps = self.start_epoch = 0
        self.started = self.last_line = 0.0
        self.estimated = False

    def note(self, message: str) -> None:
        if not self.disable:
            print(message, file=sys.stderr, flush=True)

    def start(self, epochs: int, start_epoch: int, steps_per_epoch: int) -> None:
        self.epochs, self.start_epoch, self.steps = epochs, start_epoch, steps_per_epoch
        self.started = time.perf_counter()

    def step(self, epoch: int, step: int, running: dict[str, float], images_per_s: float) -> None:
        now = time.perf_counter()
        if not self.disable and not self.estimated:
            self.estimated = True
            left = self.epochs - self.start_epoch
            self._write(estimate_line(left, self.steps, step, now - self.started, images_per_s))
        if self.lines:
            if step == 1 or step == self.steps or now - self.last_line >= self.line_seconds:
                self.last_line = now
                self._write(step_line(epoch, self.epochs, step, self.steps, running, images_per_s))
            return
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

    def _write(self, line: str) -> None:
        tqdm.write(line, file=sys.stderr)

    def epoch(self, record: dict[str, Any]) -> None:
        self.close()
        tqdm.write(format_record(record, self.epochs), file=sys.stdout)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
