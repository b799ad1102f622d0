"""What ``vitlab evaluate`` and ``vitlab predict`` ask of a task's checkpoint: one request type each,
whose fields are the commands' options, handed to the task's handler (see :class:`~vitlab.tasks.TaskSpec`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..data.options import DataOptions


@dataclass
class EvaluateRequest:
    """Score ``checkpoint`` (as given: a run folder, a file, a hub id) on a ``split`` of its dataset (or of
    ``dataset``); ``out``: a folder for the report files; ``linear_probe`` / ``knn``
    (with ``k`` neighbours, fitted on the first ``rows`` training rows): accuracy of classifiers on frozen features
    instead; ``options``: how image files are read."""

    checkpoint: str
    split: str = "test"
    dataset: str | None = None
    data_dir: str | None = None
    temperature_scale: bool = False
    out: str | None = None
    overwrite: bool = False
    linear_probe: bool = False
    knn: bool = False
    k: int = 20
    rows: int | None = None
    device: str = "auto"
    options: DataOptions | None = None


@dataclass
class PredictRequest:
    """Predict with ``checkpoint`` on ``images`` (files or folders): the ``top_k`` classes (as a table,
    ``json``, or a CSV at ``out``), a dense model's overlay (boxes under ``min_score`` not drawn), a promptable model's
    mask for ``points`` (``"X,Y"``) and / or ``box`` (``"X0,Y0,X1,Y1"``), a CLIP model's ranking of ``captions``."""

    checkpoint: str
    images: list[str]
    top_k: int = 5
    json: bool = False
    out: str | None = None
    min_score: float = 0.5
    point: list[str] = field(default_factory=list)
    box: str | None = None
    captions: list[str] | None = None
    device: str = "auto"
    options: DataOptions | None = None


__all__ = ["EvaluateRequest", "PredictRequest"]
