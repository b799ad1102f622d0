"""How vitlab's objects show in a notebook: HTML (and PNG) built from the reports vitlab already renders.

- a model (any ``nn.Module`` of vitlab's): its parameter table by component
  (:func:`~vitlab.analysis.params.parameter_table`) and, for a ViT, the tensor shapes through a block at its
  sizes (:func:`~vitlab.analysis.shapes.shapes_report`);
- a loaded checkpoint (:class:`~vitlab.runs.Loaded`): where it came from, how its pixels are fed (its data
  config), its classes, and its model's table;
- a training (:class:`~vitlab.tasks.RunResult`) and a run folder (:class:`RunFolder`): the curves per epoch and
  the summary;
- a study (:class:`~vitlab.experiments.CompareResult`): its ``report.md`` (tables, verdicts, conclusions,
  figures), or its results table when it wrote no files;
- an explanation (:class:`~vitlab.explain.request.Explained`): its summary and its figures (the image with each
  map, on the figure's own scale).

:func:`register` teaches IPython these displays by the objects' module and class names, so the models, runs and
checkpoints themselves need no display code and nothing is imported until an object is shown (``import vitlab``
registers them in a running IPython). Models' and classes' modules never import this one.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .markup import figure_png, frame, markdown_html, png_image, table, text_block

CLASSES_SHOWN = 20  # a checkpoint's classes listed by name; the rest are counted


def model_html(model: Any) -> str | None:
    """A vitlab model's parameter table by component (and, for a ViT, its shapes); ``None`` for a module that is
    not vitlab's (IPython then shows its usual text)."""
    if not type(model).__module__.startswith("vitlab."):
        return None
    return frame(_model_body(model))


def params_text(model: Any) -> str:
    """The model's parameters by component (:func:`~vitlab.analysis.params.parameter_table`) in the analysis
    reports' table (:func:`~vitlab.reporting.aligned_table`), a trainable column where some are frozen, and
    the totals."""
    from ..analysis.params import parameter_table
    from ..reporting import aligned_table

    rows = parameter_table(model)
    frozen = any(r.trainable != r.params for r in rows)
    header = ["component", "size", "params", *(["trainable"] if frozen else [])]
    cells = [[r.component, r.size, f"{r.params:,}", *([f"{r.trainable:,}"] if frozen else [])] for r in rows]
    total, trainable = sum(r.params for r in rows), sum(r.trainable for r in rows)
    cells += [["total", "", f"{total:,}", *([f"{trainable:,}"] if frozen else [])]]
    return "\n".join(aligned_table(header, cells))


def _model_body(model: Any, name: str | None = None) -> str:
    title = f"{name or type(model).__name__} ({type(model).__name__}): parameters by component"
    body = text_block(params_text(model), title)
    shapes = _shapes_text(model)
    return body + (text_block(shapes, "shapes through one block at these sizes") if shapes else "")


def _shapes_text(model: Any) -> str | None:
    """:func:`~vitlab.analysis.shapes.shapes_report` at a square ViT's sizes (``None`` for other models)."""
    from ..analysis.shapes import shapes_report
    from ..models.vit import VisionTransformer

    if not isinstance(model, VisionTransformer):
        return None
    c = model.config
    side = c.img_size if isinstance(c.img_size, int) else c.img_size[0] if c.img_size[0] == c.img_size[1] else None
    if side is None:
        return None
    return shapes_report(side, c.patch_size, c.embed_dim, c.num_heads, c.class_token, c.in_chans)


def loaded_rows(loaded: Any) -> list[tuple[str, str]]:
    """A loaded checkpoint's source and data config as ``(field, value)`` rows."""
    data = loaded.data
    source = loaded.metadata.get("source") or "vitlab"
    hub_id = loaded.metadata.get("source_id")
    rows = [
        ("source", f"{hub_id or loaded.path} ({source})"),
        *([("file", str(loaded.path))] if hub_id else []),
        ("kind", str(loaded.kind)),
        ("model", f"{loaded.name or type(loaded.model).__name__} ({type(loaded.model).__name__})"),
        ("dataset", f"{data.dataset or 'not recorded'}" + (f" in {data.data_dir}" if data.data_dir else "")),
        ("input", f"{data.in_chans} x {data.image_size[0]} x {data.image_size[1]}"),
        ("resize", f"{data.interpolation}, crop {data.crop_mode} at {data.crop_pct:g}"),
        ("mean", ", ".join(f"{v:.4f}" for v in data.mean)),
        ("std", ", ".join(f"{v:.4f}" for v in data.std)),
    ]
    classes = data.classes
    shown = ", ".join(classes[:CLASSES_SHOWN]) + (
        f", ... ({len(classes) - CLASSES_SHOWN} more)" if len(classes) > CLASSES_SHOWN else ""
    )
    rows.append(("classes", f"{len(classes)}: {shown}" if classes else "not recorded"))
    rows += [(f"guessed {name}", why) for name, why in loaded.guessed.items()]
    return rows


def loaded_html(loaded: Any) -> str:
    """A loaded checkpoint: its source, data config and classes, then its model's table."""
    return frame(table(("checkpoint", ""), loaded_rows(loaded)) + _model_body(loaded.model, loaded.name))


@dataclass
class RunFolder:
    """A run folder as a notebook shows it: its ``config`` (``config.json``), its epochs' ``history``
    (``metrics.jsonl``) and ``summary`` (``summary.json``, empty while the run has not finished)."""

    path: Path
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str | Path) -> RunFolder:
        """Read the run folder at ``path`` (a missing file reads as empty; a folder that is not a run is refused)."""
        from ..errors import RunFolderError
        from ..runs.files import read_json
        from ..runs.layout import CONFIG, METRICS, SUMMARY

        folder = Path(path)
        if not (folder / CONFIG).is_file():
            raise RunFolderError(f"{folder} is not a run folder (no {CONFIG}): pass the --out of a vitlab train")
        metrics = folder / METRICS
        history = (
            [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()] if metrics.is_file() else []
        )
        summary = read_json(folder / SUMMARY, "summary") if (folder / SUMMARY).is_file() else {}
        return cls(folder, read_json(folder / CONFIG, "config"), history, summary)

    def _repr_html_(self) -> str:
        return run_html(self.history, self.summary, str(self.path))

    def _repr_png_(self) -> bytes | None:
        return curves_png(self.history, str(self.path))


def curves_png(history: Sequence[dict[str, Any]], title: str) -> bytes | None:
    """Loss and accuracy per epoch (train and validation, where measured) as PNG; ``None`` before an epoch."""
    from matplotlib.figure import Figure

    if not history:
        return None
    epochs = [r["epoch"] for r in history]
    kinds = [k for k in ("loss", "acc") if any(f"train_{k}" in r or f"val_{k}" in r for r in history)]
    if not kinds:
        return None
    fig = Figure(figsize=(4.2 * len(kinds), 3.0))
    for ax, kind in zip(fig.subplots(1, len(kinds), squeeze=False)[0], kinds):
        for split in ("train", "val"):
            points = [(e, r[f"{split}_{kind}"]) for e, r in zip(epochs, history) if f"{split}_{kind}" in r]
            if points:
                ax.plot(*zip(*points), marker="o", markersize=3, label=split)
        ax.set_xlabel("epoch")
        ax.set_ylabel("accuracy" if kind == "acc" else "loss")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return figure_png(fig)


def _figures(value: Any) -> str:
    return "" if value is None else f"{value:.4f}" if isinstance(value, float) else str(value)


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """A run's summary as ``(name, value)`` rows: each validation and test figure, then the other fields."""
    rows = []
    for part in ("val", "test"):
        rows += [
            (f"{part} {k}", _figures(v)) for k, v in (summary.get(part) or {}).items() if not isinstance(v, dict | list)
        ]
    rows += [
        (k, _figures(v)) for k, v in summary.items() if k not in ("val", "test") and not isinstance(v, dict | list)
    ]
    return rows


def run_html(history: Sequence[dict[str, Any]], summary: dict[str, Any], title: str) -> str:
    """A training's summary table and its curves."""
    png = curves_png(history, title)
    body = f"<p><strong>{html.escape(title)}</strong>: {len(history)} epoch{'s' * (len(history) != 1)}</p>"
    body += (
        table(("summary", ""), summary_rows(summary)) if summary else "<p>no summary yet (the run has not finished)</p>"
    )
    return frame(body + (png_image(png, f"loss and accuracy per epoch of {title}") if png else ""))


def result_summary(result: Any) -> dict[str, Any]:
    """A :class:`~vitlab.tasks.RunResult`'s summary in ``summary.json``'s terms (its task's summary)."""
    from ..tasks import get_task

    return get_task(result.task).summary(result)


def result_html(result: Any) -> str:
    """A training's result: its summary (as its run folder's ``summary.json`` says it) and its curves."""
    where = f" in {result.config.out_dir}" if result.config.out_dir else ""
    return run_html(result.history, result_summary(result), f"{result.task} run{where}")


def result_png(result: Any) -> bytes | None:
    return curves_png(result.history, f"{result.task} run")


def compare_html(result: Any) -> str:
    """A study: its ``report.md`` (results, verdicts, leads, conclusions, figures) when it wrote one, else its
    results table."""
    report = result.files.get("report")
    if report is not None and Path(report).is_file():
        return frame(markdown_html(Path(report).read_text(), Path(report).parent))
    from ..experiments.aggregates import aggregate
    from ..experiments.tables import results_table

    return frame(markdown_html("\n".join(results_table(aggregate(list(result.records.values()))))))


def explained_html(explained: Any) -> str:
    """An explanation: its summary (the prediction, each map's top patch and maximum), then each figure it wrote
    (the image with each map over it, on the figure's own scale), or the audit's / probes' report."""
    images = "".join(png_image(f.read_bytes(), f.stem) for f in _figure_files(explained))
    return frame(text_block(explained.text.rstrip("\n"), "explanation") + images)


def explained_png(explained: Any) -> bytes | None:
    """The first figure an explanation wrote (the image and its maps)."""
    return next((f.read_bytes() for f in _figure_files(explained)), None)


def _figure_files(explained: Any) -> list[Path]:
    """The PNG files an example's or the probes' report lists (an audit's result lists none)."""
    files = explained.result.get("files", []) if isinstance(explained.result, dict) else []
    return [Path(f) for f in files if Path(f).suffix == ".png" and Path(f).is_file()]


# (module, class) -> its HTML and its PNG (None: none); found by name, so nothing is imported to register them.
DISPLAYS: dict[tuple[str, str], tuple[Callable[[Any], str | None], Callable[[Any], bytes | None] | None]] = {
    ("torch.nn.modules.module", "Module"): (model_html, None),
    ("vitlab.runs.loaded", "Loaded"): (loaded_html, None),
    ("vitlab.tasks.result", "RunResult"): (result_html, result_png),
    ("vitlab.experiments.records", "CompareResult"): (compare_html, None),
    ("vitlab.explain.request", "Explained"): (explained_html, explained_png),
}


def register(shell: Any = None) -> bool:
    """Teach IPython's ``shell`` (default: the running one) vitlab's displays; ``False`` outside IPython."""
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
        if shell is None:
            return False
    formatters = shell.display_formatter.formatters
    for (module, name), (to_html, to_png) in DISPLAYS.items():
        formatters["text/html"].for_type_by_name(module, name, to_html)
        if to_png is not None:
            formatters["image/png"].for_type_by_name(module, name, to_png)
    return True


__all__ = [
    "DISPLAYS",
    "RunFolder",
    "compare_html",
    "curves_png",
    "explained_html",
    "loaded_html",
    "loaded_rows",
    "model_html",
    "params_text",
    "register",
    "result_html",
    "run_html",
    "summary_rows",
]
