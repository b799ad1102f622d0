"""vitlab from Python, as the command line does it: each function is the library call its command makes,
returning the object (which a notebook shows, see :mod:`vitlab.notebook.display`) instead of printing.

- ``vitlab train ...``: ``vitlab.run("classify", dataset=..., epochs=..., out_dir=...)`` -> ``RunResult``
- ``vitlab compare ...``: ``vitlab.compare(preset=..., rows=[...], out=...)`` -> ``CompareResult``
- ``vitlab evaluate CKPT ...``: ``vitlab.evaluate(CKPT, split="val", knn=True)`` -> the text it prints
- ``vitlab predict CKPT IMAGE...``: ``vitlab.predict(CKPT, [IMAGE, ...])`` -> the text it prints
- ``vitlab explain CKPT ...``: ``vitlab.explain(CKPT, index=3, out="explain")`` -> ``Explained``
- a checkpoint or a run folder: ``vitlab.load(CKPT)`` -> ``Loaded``, ``vitlab.run_folder(RUN)`` -> ``RunFolder``

Progress shows as the commands' does (a notebook widget where ``ipywidgets`` is installed, else lines);
``progress=False`` turns it off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .display import RunFolder

if TYPE_CHECKING:
    from ..experiments import CompareResult, RunPlan, RunRecord
    from ..explain.request import Explained
    from ..runs import Loaded
    from ..tasks import RunResult


def load(source: str | Path, device: str = "cpu", **config: Any) -> Loaded:
    """The model at ``source`` (a run folder, a checkpoint, timm / Hugging Face weights or a hub id) with its data
    config: :func:`vitlab.runs.load_checkpoint` (``config``: its ``model=`` and the fields foreign weights do
    not record, e.g. ``num_heads=3``)."""
    from ..runs import load_checkpoint

    return load_checkpoint(source, device, **config)


def run_folder(path: str | Path) -> RunFolder:
    """The run folder at ``path`` (its config, epochs and summary; shown as its curves and summary)."""
    return RunFolder.read(path)


def run(task: str = "classify", config: Any = None, *, progress: bool = True, **fields: Any) -> RunResult:
    """Train ``task`` as ``vitlab train --task TASK --config FILE --set ...`` does: under ``config`` (the task's
    config object, used as it is, or a YAML/JSON config file or its mapping) with ``fields`` over it (any field of
    the task's config or of its model's, ``data.image_size=...`` as ``**{"data.image_size": 64}``, e.g.
    ``epochs=5, depth=4, out_dir="runs/digits"``; ``recipe`` defaults to ``"default"`` for a task with recipes),
    resolved by :func:`vitlab.tasks.resolve_config`, the one resolution the CLI uses. Returns the
    :class:`~vitlab.tasks.RunResult`."""
    from ..engine import RunConfig, TqdmReporter
    from ..errors import ConfigError
    from ..tasks import get_task, resolve_config
    from ..tasks import run as run_task

    spec = get_task(task)
    if isinstance(config, RunConfig):
        if fields:
            raise ConfigError(f"give run() a config object or its fields, not both (got {', '.join(fields)})")
    else:
        recipe = {"recipe": "default"} if spec.config.RECIPES and "recipe" not in fields and config is None else {}
        run_fields = {k: fields.pop(k) for k in ("out_dir", "resume", "overwrite") if k in fields}
        config = resolve_config(spec, config, {**recipe, **fields}, **run_fields)
    return run_task(spec, config, reporter=TqdmReporter() if progress else None)


class RunsBar:
    """A study's progress as one bar over its runs (a notebook widget, else a terminal bar or lines)."""

    def __init__(self) -> None:
        self.bar: Any = None

    def __call__(self, done: int, total: int, run: RunPlan, record: RunRecord) -> None:
        from tqdm.auto import tqdm

        if self.bar is None:
            self.bar = tqdm(total=total, desc="runs", unit="run")
        self.bar.update(done - self.bar.n)
        self.bar.set_postfix_str(f"{run.model}: val {record.best_val_acc:.4f}")
        if done == total:
            self.bar.close()


def compare(
    preset: str | None = None,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool = True,
    **fields: Any,
) -> CompareResult:
    """The study ``vitlab compare`` runs: ``preset`` (e.g. ``"textbook"``) with any field of its
    :class:`~vitlab.experiments.CompareConfig` in ``fields`` (e.g. ``rows=[300], epochs=5, seeds=2``), written to
    ``out`` (default ``runs/NAME``) as the command writes it; one run after the other in this process. Returns the
    :class:`~vitlab.experiments.CompareResult`."""
    from ..experiments import run_compare
    from ..experiments.command import compare_config

    options = {"preset": preset, "out": None if out is None else str(out)}
    config = compare_config(options, lambda: ({}, fields))
    return run_compare(config, progress=RunsBar() if progress else None, overwrite=overwrite)


def evaluate(source: str | Path, *, device: str = "cpu", **request: Any) -> str:
    """What ``vitlab evaluate SOURCE`` prints: the checkpoint's task scores it with the request's fields
    (:class:`~vitlab.tasks.EvaluateRequest`: ``split``, ``dataset``, ``data_dir``, ``knn``, ``linear_probe``,
    ``out``, ...)."""
    from ..tasks import EvaluateRequest, task_for_kind

    loaded = load(source, device)
    spec = task_for_kind(loaded.kind, "evaluate")
    kind = getattr(spec, "evaluate_request", EvaluateRequest)  # the task's own request type, where it declares one
    return spec.evaluate(loaded, kind(checkpoint=str(source), device=device, **request))  # type: ignore[misc]


def predict(source: str | Path, images: Sequence[str | Path], *, device: str = "cpu", **request: Any) -> str:
    """What ``vitlab predict SOURCE IMAGE...`` prints for ``images`` (files or folders), with the request's
    fields (:class:`~vitlab.tasks.PredictRequest`: ``top_k``, ``json``, ``out``, ...)."""
    from ..tasks import PredictRequest, task_for_kind

    loaded = load(source, device)
    spec = task_for_kind(loaded.kind, "predict")
    files = [str(i) for i in images]
    kind = getattr(spec, "predict_request", PredictRequest)  # the task's own request type, where it declares one
    return spec.predict(loaded, kind(checkpoint=str(source), images=files, device=device, **request))  # type: ignore[misc]


def explain(source: str | Path, *, out: str | Path = "explain", device: str = "cpu", **request: Any) -> Explained:
    """What ``vitlab explain SOURCE`` makes: an example's maps (``index``, ``split``, ``method``, ``query``), an
    ``audit=True``, or ``probes=[...]`` (:class:`~vitlab.explain.request.ExplainRequest`'s fields), written to
    ``out``. Returns the :class:`~vitlab.explain.request.Explained` (shown as its summary and figures)."""
    from ..explain.request import ExplainRequest, explain_request
    from ..tasks.classify import retrainer

    asked = ExplainRequest(out=out, device=device, **request)
    return explain_request(asked, lambda: load(source, device), retrainer)


__all__ = ["compare", "evaluate", "explain", "load", "predict", "run", "run_folder"]
