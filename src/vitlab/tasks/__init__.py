"""The task wing: every task declared once in the registry, and one way to run any of them.

- ``registry``: :class:`TaskSpec` (name, config, engine task builder, checkpoint kinds, evaluate / predict
  handlers, summary), :func:`register`, :func:`get_task`, :func:`task_for_kind`.
- ``run``: :func:`run` ``(spec, config) -> RunResult``, the one entry point of every training, and
  :func:`resolve_config` (a config file, then options, then ``--set``), the one way its config is resolved.
- ``requests``: what ``vitlab evaluate`` / ``vitlab predict`` ask of a checkpoint's task.
- ``classify`` (with ``distill``, DeiT's teacher), ``ssl`` (MAE, DINO, probes), ``dense`` (segment, detect),
  ``promptable``, ``clip``: each a package holding its config, engine task, losses, predictor and spec.
"""

from .classify import SPLITS, Prediction, build_student, classify_files, evaluate_checkpoint, image_files, load_splits
from .classify.spec import CLASSIFY
from .clip.spec import CLIP
from .dense.spec import DETECT, SEGMENT
from .promptable.spec import PROMPTABLE
from .registry import (
    TaskSpec,
    broken,
    get_task,
    register,
    registered,
    specs,
    task_for_kind,
    unregister,
)
from .requests import EvaluateRequest, PredictRequest
from .run import RunResult, fit_summary, resolve_config, run
from .ssl.spec import PRETRAIN

__all__ = [
    "CLASSIFY",
    "CLIP",
    "DETECT",
    "PRETRAIN",
    "PROMPTABLE",
    "SEGMENT",
    "SPLITS",
    "EvaluateRequest",
    "PredictRequest",
    "Prediction",
    "RunResult",
    "TaskSpec",
    "broken",
    "build_student",
    "classify_files",
    "evaluate_checkpoint",
    "fit_summary",
    "get_task",
    "image_files",
    "load_splits",
    "register",
    "registered",
    "resolve_config",
    "run",
    "specs",
    "task_for_kind",
    "unregister",
]
