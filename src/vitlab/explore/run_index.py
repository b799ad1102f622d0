"""The run folders given on the command line: ``vitlab compare`` studies and ``vitlab train`` runs.

A root given with ``--runs`` is a run itself or holds runs one level down. A **compare** study has
``results.json`` (with ``report.md`` and PNG figures); a **train** run has ``metrics.jsonl`` or
``summary.json`` (and ``config.json``). Runs are found afresh on every listing, so runs finished
while the explorer is open appear, and are addressed by name, never by path: a name is looked up
in that listing, a figure by its name in the run's listing.

Every file is read or served through :mod:`vitlab.explore.run_files` (confined to the resolved runs
root, capped in size, JSON checked); a run folder reached through a link leaving its root is not listed.
A run whose files are unreadable or not what vitlab writes is **broken**: the listing shows it
with the reason, the other runs as usual, and its own endpoints answer 403 / 409 / 422 with the
reason.

Tables rank on the server: :func:`rank_table` sorts the rows by a column and computes the
extremes and bar lengths the front end draws.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runs.layout import CONFIG, METRICS, REPORT, RESULTS, RUN, SUMMARY
from .images import RequestError
from .run_files import Run, as_object, as_objects, read_json, read_text, real_path, run_file

COMPARE_FILE = RESULTS
TRAIN_FILES = (METRICS, SUMMARY)
REPORT_FILE = REPORT
LABELS = {
    "best_val_acc": "best val acc",
    "test_acc": "test acc",
    "final_train_acc": "final train acc",
    "train_rows": "train rows",
    "val_ece": "val ECE",
    "best_epoch": "best epoch",
    "train_acc": "train acc",
    "val_acc": "val acc",
    "train_loss": "train loss",
    "val_loss": "val loss",
    "images_per_s": "images/s",
}


@dataclass
class Table:
    """Rows of values under named columns; ``label`` is the column naming each row."""

    columns: list[str]
    rows: list[dict[str, Any]]
    label: str


def run_kind(folder: Path) -> str | None:
    """``"compare"``, ``"train"`` or ``None`` (not a run folder)."""
    if (folder / COMPARE_FILE).is_file():
        return "compare"
    if any((folder / name).is_file() for name in TRAIN_FILES):
        return "train"
    return None


def run_folders(root: Path) -> list[tuple[str, Path]]:
    """``(name, real path)`` of the candidate run folders of ``root`` (real): itself if it is a run,
    else its sub-folders whose real path stays inside it."""
    if run_kind(root):
        return [(root.name, root)]
    try:
        children = sorted(root.iterdir())
    except OSError:
        return []
    found = ((p.name, real_path(p)) for p in children)
    return [(name, real) for name, real in found if real is not None and real.is_relative_to(root) and real.is_dir()]


def find_runs(roots: list[Path]) -> dict[str, Run]:
    """The runs under ``roots`` by unique name (a repeated folder name gets ``~2``, ``~3``...)."""
    runs: dict[str, Run] = {}
    for root in filter(None, map(real_path, roots)):
        for folder_name, folder in run_folders(root):
            kind = run_kind(folder)
            if kind is None:
                continue
            name, k = folder_name, 1
            while name in runs:
                k += 1
                name = f"{folder_name}~{k}"
            runs[name] = Run(name, kind, folder, root)
    return runs


def number(value: Any) -> float | int | None:
    """``value`` if it is a number (not a bool), else ``None``."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def compare_results(run: Run) -> dict[str, Any]:
    """A study's ``results.json``, checked to have the shape `vitlab compare` writes: an object with
    ``config`` (object), ``runs`` (objects with ``axes`` and ``curves``: objects, curves lists) and
    ``conclusions`` (list)."""
    where = f"{COMPARE_FILE} of run {run.name}"
    results = as_object(read_json(run, COMPARE_FILE), where)
    as_object(results.get("config"), f"'config' in {where}")
    for i, record in enumerate(as_objects(results.get("runs"), f"'runs' in {where}")):
        as_object(record.get("axes"), f"runs[{i}].axes in {where}")
        curves = as_object(record.get("curves"), f"runs[{i}].curves in {where}")
        if not all(isinstance(v, list) for v in curves.values()):
            raise RequestError(f"runs[{i}].curves in {where} holds a value that is not a list", 422)
    if not isinstance(results.get("conclusions", []), list):
        raise RequestError(f"'conclusions' in {where} is not a list", 422)
    return results


def train_epochs(run: Run) -> list[dict[str, Any]]:
    """A training run's ``metrics.jsonl``: one object per epoch (``[]`` if there is no file)."""
    text = read_text(run, METRICS) or ""
    lines = [(i + 1, line) for i, line in enumerate(text.splitlines()) if line.strip()]
    return [
        as_object(read_json(run, METRICS, i, line), f"line {i} of metrics.jsonl of run {run.name}") for i, line in lines
    ]


def train_config(run: Run) -> dict[str, Any]:
    """A training run's ``config.json`` (``{}`` if there is none)."""
    return as_object(read_json(run, CONFIG), f"config.json of run {run.name}")


def run_task(run: Run) -> str | None:
    """The kind of run ``run.json`` records (``classify``, ``promptable``, ...); ``None`` without one."""
    kind = as_object(read_json(run, RUN), f"{RUN} of run {run.name}").get("kind")
    return kind if isinstance(kind, str) else None


def train_summary(run: Run) -> dict[str, Any]:
    """A training run's ``summary.json`` (``{}`` if there is none), its ``test`` an object if present."""
    summary = as_object(read_json(run, SUMMARY), f"summary.json of run {run.name}")
    as_object(summary.get("test"), f"'test' in summary.json of run {run.name}")
    return summary


def overview_row(run: Run) -> dict[str, Any]:
    """One row of the overview table: the run's best validation accuracy and what it cost."""
    if run.kind == "compare":
        results = compare_results(run)
        best: dict[str, Any] = max(
            results.get("runs") or [], default={}, key=lambda r: number(r.get("best_val_acc")) or -1.0
        )
        config = results.get("config") or {}
        study = f"{config.get('vit')} vs {config.get('cnn')}"
        model = f"{study} (best: {best['label']})" if best.get("label") else study  # the numbers are the best run's
        return {
            "run": run.name,
            "kind": run.kind,
            "model": model,
            "dataset": config.get("dataset"),
            "best_val_acc": best.get("best_val_acc"),
            "test_acc": best.get("test_acc"),
            "params": best.get("params"),
            "epochs": config.get("epochs"),
            "seconds": results.get("seconds"),
        }
    summary, config, epochs = train_summary(run), train_config(run), train_epochs(run)
    val = [v for v in (number(e.get("val_acc")) for e in epochs) if v is not None]
    seconds = sum(number(e.get("seconds")) or 0.0 for e in epochs)
    named = config.get("model")
    return {
        "run": run.name,
        "kind": run.kind,
        "model": named if isinstance(named, str) else run_task(run),  # a task's config holds model overrides
        "dataset": config.get("dataset"),
        "best_val_acc": summary.get("best_val_acc", max(val, default=None)),
        "test_acc": (summary.get("test") or {}).get("acc"),
        "params": summary.get("params"),
        "epochs": len(epochs),
        "seconds": summary.get("seconds", seconds),
    }


def broken_row(run: Run, reason: str) -> dict[str, Any]:
    """The overview row of a run that cannot be read: its name, kind and why."""
    return {"run": run.name, "kind": run.kind, "broken": reason}


def overview(runs: dict[str, Run]) -> tuple[Table, dict[str, str]]:
    """Every run, one row each, and the reason each broken run could not be read, by name."""
    rows, broken = [], {}
    for run in runs.values():
        try:
            rows.append(overview_row(run))
        except RequestError as err:
            broken[run.name] = str(err)
            rows.append(broken_row(run, str(err)))
    columns = ["run", "kind", "model", "dataset", "best_val_acc", "test_acc", "params", "epochs", "seconds"]
    return Table(columns, rows, "run"), broken


def axis_values(record: dict[str, Any]) -> dict[str, Any]:
    """A study run's axes, the full pool (``rows: None``) given as the rows it used (``train_rows``)."""
    axes = dict(record.get("axes") or {})
    if "rows" in axes and axes["rows"] is None:
        axes["rows"] = record.get("train_rows")
    return axes


def run_table(run: Run) -> Table:
    """A study's training runs (label, axes, metrics), or a training run's epochs."""
    if run.kind == "train":
        epochs = train_epochs(run)
        columns = list(dict.fromkeys(key for e in epochs for key in e)) or ["epoch"]
        return Table(columns, epochs, "epoch")
    records = compare_results(run).get("runs") or []
    axes = list(dict.fromkeys(name for r in records for name in r.get("axes") or {}))
    metrics = [
        "train_rows",
        "params",
        "best_val_acc",
        "best_epoch",
        "final_train_acc",
        "gap",
        "val_ece",
        "test_acc",
        "seconds",
    ]
    rows = [
        {"label": r.get("label"), **{a: axis_values(r).get(a) for a in axes}, **{m: r.get(m) for m in metrics}}
        for r in records
    ]
    return Table(["label", *axes, *metrics], rows, "label")


def curves(run: Run) -> list[dict[str, Any]]:
    """Learning-curve panels: ``{"title", "series": [{"label", "x", "y"}]}`` per metric; a training run's
    series only where it recorded that metric, its panels only where it has a series."""
    if run.kind == "train":
        epochs = train_epochs(run)
        x = [e.get("epoch", i + 1) for i, e in enumerate(epochs)]
        panels = [
            {
                "title": title,
                "series": [
                    {"label": LABELS[key], "x": x, "y": [e.get(key) for e in epochs]}
                    for key in keys
                    if any(e.get(key) is not None for e in epochs)  # a task without accuracy (promptable) has none
                ],
            }
            for title, keys in (("accuracy", ("train_acc", "val_acc")), ("loss", ("train_loss", "val_loss")))
        ]
        return [panel for panel in panels if panel["series"]]
    records = compare_results(run).get("runs") or []

    def name(record: dict[str, Any]) -> str:
        axes = ", ".join(f"{k} {v}" for k, v in axis_values(record).items() if k != "patch")
        return f"{record.get('label')} ({axes})" if axes else str(record.get("label"))

    return [
        {
            "title": LABELS[key],
            "series": [
                {"label": name(r), "x": list(range(1, len(r["curves"][key]) + 1)), "y": r["curves"][key]}
                for r in records
                if key in (r.get("curves") or {})
            ],
        }
        for key in ("val_acc", "val_loss")
    ]


def figures(run: Run) -> dict[str, Path]:
    """The PNG files directly in the run folder, by file name, as real paths; one that links
    outside the runs root or is not a regular file is left out."""
    found = {}
    for path in sorted(run.path.glob("*.png")):
        try:
            real = run_file(run, path.name)
        except RequestError:
            continue
        if real is not None:
            found[path.name] = real
    return found


def report(run: Run) -> str | None:
    """The run's ``report.md``; ``None`` if there is none or it cannot be served (as a figure)."""
    try:
        return read_text(run, REPORT_FILE)
    except RequestError:
        return None


def run_detail(run: Run) -> dict[str, Any]:
    """Everything the Runs page shows about one run, but its table (ranked separately)."""
    facts: dict[str, Any]
    if run.kind == "compare":
        results = compare_results(run)
        facts = {
            "config": results.get("config"),
            "data": results.get("data"),
            "conclusions": results.get("conclusions", []),
        }
    else:
        facts = {"config": train_config(run), "summary": train_summary(run), "task": run_task(run)}
    return {
        "name": run.name,
        "kind": run.kind,
        "facts": facts,
        "curves": curves(run),
        "figures": list(figures(run)),
        "report": report(run),
    }


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool) or value is None:
        return (2, 0)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value))


def rank_table(table: Table, by: str | None = None, descending: bool | None = None) -> dict[str, Any]:
    """``table`` sorted by column ``by`` (default: the label column; missing values last), with each
    row's rank and, for a numeric column, the highest and lowest values, which rows hold them, and
    each row's bar length in [0, 1], measured from zero: ``(value - lo) / (hi - lo)`` with ``lo =
    min(0, min)`` and ``hi = max(0, max)``, so the lowest value of a positive column still has its bar
    (and a column of zeros none). ``descending=None`` ranks numbers highest first and text in
    alphabetical order."""
    by = by or table.label
    if by not in table.columns:
        raise RequestError(f"no column {by!r} to rank by: choose one of {table.columns}")
    present = [r for r in table.rows if _sort_key(r.get(by))[0] < 2]
    missing = [r for r in table.rows if _sort_key(r.get(by))[0] == 2]
    numbers = [r[by] for r in present if _sort_key(r[by])[0] == 0]
    numeric = bool(numbers) and len(numbers) == len(present)
    descending = numeric if descending is None else descending
    ordered = sorted(present, key=lambda r: _sort_key(r.get(by)), reverse=descending) + missing
    extremes: dict[str, Any] | None = None
    bars: list[float | None] = [None] * len(ordered)
    if numeric:
        low, high = min(numbers), max(numbers)
        at = {v: next(str(r[table.label]) for r in present if r[by] == v) for v in (low, high)}
        extremes = {"min": {"value": low, "row": at[low]}, "max": {"value": high, "row": at[high]}}
        start, end = min(0, low), max(0, high)
        # halved, so that the span between two finite extremes cannot overflow to infinity
        bars = [
            None if r.get(by) is None else (0.0 if end == start else (r[by] / 2 - start / 2) / (end / 2 - start / 2))
            for r in ordered
        ]
    return {
        "columns": [{"key": c, "label": LABELS.get(c, c.replace("_", " "))} for c in table.columns],
        "label": table.label,
        "sort": {"by": by, "descending": descending},
        "rows": [{"rank": i + 1, "values": r, "bar": bar} for i, (r, bar) in enumerate(zip(ordered, bars))],
        "extremes": extremes,
    }


class RunShelf:
    """The run roots given at start-up; every lookup re-reads the listing."""

    def __init__(self, roots: list[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]

    def runs(self) -> dict[str, Run]:
        return find_runs(self.roots)

    def get(self, name: str) -> Run:
        runs = self.runs()
        if name not in runs:
            raise RequestError(
                f"no run {name!r}: the runs found under {[str(r) for r in self.roots]} are {list(runs) or 'none'}", 404
            )
        return runs[name]

    def figure(self, name: str, file: str) -> Path:
        """The path of figure ``file`` of run ``name``, if it is in the run's listing."""
        found = figures(self.get(name))
        if file not in found:
            raise RequestError(f"run {name!r} has no figure {file!r}: its figures are {list(found) or 'none'}", 404)
        return found[file]
