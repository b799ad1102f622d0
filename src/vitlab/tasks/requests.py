"""What ``vitlab evaluate`` and ``vitlab predict`` ask of a task's checkpoint: :class:`EvaluateRequest` and
:class:`PredictRequest` hold what every task's command takes (the checkpoint, the images or the split, where
to write, the device, how images are read); a task with options of its own declares a subclass beside its
handler, each field an :func:`option` (its help and allowed values), and names it in its
:class:`~vitlab.tasks.TaskSpec` (``evaluate_request`` / ``predict_request``). The command line derives a flag
from each such field (``top_k`` -> ``--top-k``), so a new task's options are written once, in its own file::

    @dataclass
    class SegmentPredict(PredictRequest):
        min_score: float = option(0.5, "boxes below this score are not drawn", Float(0.0, 1.0))
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..checks import Check, check_fields
from ..data.options import DataOptions


def option(default: Any, help: str, check: Check | None = None, **flag: Any) -> Any:
    """A request field that the command line offers as a flag: its ``default`` (a list default is copied per
    request), its ``help``, the values it allows (``check``, applied when the request is made) and any
    ``argparse`` keywords of its flag (``metavar``, ``nargs``, ``action="append"``)."""
    metadata = {"help": help, "check": check, "flag": flag}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def task_options(cls: type) -> list[Any]:
    """The fields of a request class declared with :func:`option` (a task's own), in order."""
    return [f for f in fields(cls) if "help" in f.metadata]


@dataclass
class Request:
    """What both commands share: each :func:`option` field is checked when the request is made."""

    def __post_init__(self) -> None:
        check_fields(self, {f.name: f.metadata["check"] for f in task_options(type(self)) if f.metadata["check"]})


@dataclass
class EvaluateRequest(Request):
    """Score ``checkpoint`` (as given: a run folder, a file, a hub id) on a ``split`` of its dataset (or of
    ``dataset``, read from ``data_dir``); ``out``: a folder for the report files (``overwrite`` one there);
    ``options``: how image files are read."""

    checkpoint: str
    split: str = "test"
    dataset: str | None = None
    data_dir: str | None = None
    out: str | None = None
    overwrite: bool = False
    device: str = "auto"
    options: DataOptions | None = None


@dataclass
class PredictRequest(Request):
    """Predict with ``checkpoint`` on ``images`` (files or folders); ``out``: where the result goes (a task
    says what it writes); ``options``: how image files are read."""

    checkpoint: str
    images: list[str]
    out: str | None = None
    device: str = "auto"
    options: DataOptions | None = None


__all__ = ["EvaluateRequest", "PredictRequest", "Request", "option", "task_options"]
