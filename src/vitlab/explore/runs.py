"""The run folders given on the command line: ``vitlab compare`` studies and ``vitlab train`` runs.

A root given with ``--runs`` is a run itself or holds runs one level down. A **compare** study has
``results.json`` (with ``report.md`` and PNG figures); a **train** run has ``metrics.jsonl`` or
``summary.json`` (and ``config.json``). Runs are found afresh on every listing, so runs finished
while the explorer is open appear, and are addressed by name, never by path: a name is looked up
in that listing, a figure by its name in the run's listing, and a folder reached through a link
that leaves its root is skipped. Nothing else on disk can be read.

Tables rank on the server: :func:`rank_table` sorts the rows by a column and computes the
extremes and bar lengths the front end draws.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .images import RequestError

COMPARE_FILE = "results.json"
TRAIN_FILES = ("metrics.jsonl", "summary.json")
REPORT_FILE = "report.md"
LABELS = {"best_val_acc": "best val acc", "test_acc": "test acc", "final_train_acc": "final train acc",
          "train_rows": "train rows", "val_ece": "val ECE", "best_epoch": "best epoch", "train_acc": "train acc",
          "val_acc": "val acc", "train_loss": "train loss", "val_loss": "val loss", "images_per_s": "images/s"}


@dataclass(frozen=True)
class Run:
    """A run folder found under a root: its unique ``name``, ``kind`` (compare, train) and ``path``."""
    name: str
    kind: str
    path: Path


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


def _inside(path: Path, root: Path) -> bool:
    return path.resolve().is_relative_to(root)


def find_runs(roots: list[Path]) -> dict[str, Run]:
    """The runs under ``roots`` by unique name (a repeated folder name gets ``~2``, ``~3``...)."""
    runs: dict[str, Run] = {}
    for root in roots:
        root = root.resolve()
        if not root.is_dir():
            continue
        folders = [root] if run_kind(root) else sorted(p for p in root.iterdir() if p.is_dir() and _inside(p, root))
        for folder in folders:
            kind = run_kind(folder)
            if kind is None:
                continue
            name, k = folder.name, 1
            while name in runs:
                k += 1
                name = f"{folder.name}~{k}"
            runs[name] = Run(name, kind, folder)
    return runs


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RequestError(f"{path.name} of run {path.parent.name} cannot be read ({err}): is the run still "
                           f"being written?", 409) from err


def _epochs(run: Run) -> list[dict[str, Any]]:
    path = run.path / "metrics.jsonl"
    if not path.is_file():
        return []
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as err:
        raise RequestError(f"metrics.jsonl of run {run.name} is not JSON lines ({err})", 409) from err


def _optional_json(path: Path) -> dict[str, Any]:
    return _read_json(path) if path.is_file() else {}


def overview_row(run: Run) -> dict[str, Any]:
    """One row of the overview table: the run's best validation accuracy and what it cost."""
    if run.kind == "compare":
        results = _read_json(run.path / COMPARE_FILE)
        best = max(results.get("runs", []), key=lambda r: r.get("best_val_acc") or -1.0, default={})
        config = results.get("config", {})
        return {"run": run.name, "kind": run.kind, "model": f"{config.get('vit')} vs {config.get('cnn')}",
                "dataset": config.get("dataset"), "best_val_acc": best.get("best_val_acc"),
                "test_acc": best.get("test_acc"), "params": best.get("params"), "epochs": config.get("epochs"),
                "seconds": results.get("seconds")}
    summary, config = _optional_json(run.path / "summary.json"), _optional_json(run.path / "config.json")
    epochs = _epochs(run)
    val = [e["val_acc"] for e in epochs if e.get("val_acc") is not None]
    return {"run": run.name, "kind": run.kind, "model": config.get("model"), "dataset": config.get("dataset"),
            "best_val_acc": summary.get("best_val_acc", max(val, default=None)),
            "test_acc": (summary.get("test") or {}).get("acc"), "params": summary.get("params"),
            "epochs": len(epochs), "seconds": summary.get("seconds", sum(e.get("seconds", 0.0) for e in epochs))}


def overview_table(runs: dict[str, Run]) -> Table:
    """Every run, one row each."""
    return Table(["run", "kind", "model", "dataset", "best_val_acc", "test_acc", "params", "epochs", "seconds"],
                 [overview_row(run) for run in runs.values()], "run")


def run_table(run: Run) -> Table:
    """A study's training runs (label, axes, metrics), or a training run's epochs."""
    if run.kind == "train":
        epochs = _epochs(run)
        columns = list(epochs[0]) if epochs else ["epoch"]
        return Table(columns, epochs, "epoch")
    records = _read_json(run.path / COMPARE_FILE).get("runs", [])
    axes = list(dict.fromkeys(name for r in records for name in r.get("axes", {})))
    metrics = ["train_rows", "params", "best_val_acc", "best_epoch", "final_train_acc", "gap", "val_ece",
               "test_acc", "seconds"]
    rows = [{"label": r.get("label"), **{a: r.get("axes", {}).get(a) for a in axes}, **{m: r.get(m) for m in metrics}}
            for r in records]
    return Table(["label", *axes, *metrics], rows, "label")


def curves(run: Run) -> list[dict[str, Any]]:
    """Learning-curve panels: ``{"title", "metric", "series": [{"label", "x", "y"}]}`` per metric."""
    if run.kind == "train":
        epochs = _epochs(run)
        x = [e["epoch"] for e in epochs]
        return [{"title": title, "series": [{"label": LABELS[key], "x": x, "y": [e.get(key) for e in epochs]}
                                            for key in keys]}
                for title, keys in (("accuracy", ("train_acc", "val_acc")), ("loss", ("train_loss", "val_loss")))]
    records = _read_json(run.path / COMPARE_FILE).get("runs", [])

    def name(record: dict[str, Any]) -> str:
        axes = ", ".join(f"{k} {v}" for k, v in record.get("axes", {}).items() if k != "patch")
        return f"{record.get('label')} ({axes})" if axes else str(record.get("label"))

    return [{"title": LABELS[key], "series": [{"label": name(r), "x": list(range(1, len(r["curves"][key]) + 1)),
                                               "y": r["curves"][key]} for r in records if key in r.get("curves", {})]}
            for key in ("val_acc", "val_loss")]


def figures(run: Run) -> dict[str, Path]:
    """The PNG files directly in the run folder (not through links leaving it), by file name."""
    root = run.path.resolve()
    return {p.name: p for p in sorted(run.path.glob("*.png")) if p.is_file() and _inside(p, root)}


def run_detail(run: Run) -> dict[str, Any]:
    """Everything the Runs page shows about one run, but its table (ranked separately)."""
    report = run.path / REPORT_FILE
    facts: dict[str, Any]
    if run.kind == "compare":
        results = _read_json(run.path / COMPARE_FILE)
        facts = {"config": results.get("config"), "data": results.get("data"),
                 "conclusions": results.get("conclusions", [])}
    else:
        facts = {"config": _optional_json(run.path / "config.json"),
                 "summary": _optional_json(run.path / "summary.json")}
    return {"name": run.name, "kind": run.kind, "facts": facts, "curves": curves(run), "figures": list(figures(run)),
            "report": report.read_text() if report.is_file() and _inside(report, run.path.resolve()) else None}


def _sort_key(value: Any) -> tuple[int, Any]:
    if isinstance(value, bool) or value is None:
        return (2, 0)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value))


def rank_table(table: Table, by: str | None = None, descending: bool | None = None) -> dict[str, Any]:
    """``table`` sorted by column ``by`` (default: the label column; missing values last), with each
    row's rank and, for a numeric column, the highest and lowest values, which rows hold them, and
    each row's bar length ``(value - min) / (max - min)`` in [0, 1] (1 everywhere when all values
    are equal). ``descending=None`` ranks numbers highest first and text in alphabetical order."""
    by = by or table.label
    if by not in table.columns:
        raise RequestError(f"no column {by!r} to rank by: choose one of {table.columns}")
    present = [r for r in table.rows if _sort_key(r.get(by))[0] < 2]
    missing = [r for r in table.rows if _sort_key(r.get(by))[0] == 2]
    numbers = [r[by] for r in present if _sort_key(r[by])[0] == 0]
    numeric = bool(numbers) and len(numbers) == len(present)
    descending = numeric if descending is None else descending
    ordered = sorted(present, key=lambda r: _sort_key(r.get(by)), reverse=descending) + missing
    extremes, bars = None, [None] * len(ordered)
    if numeric:
        low, high = min(numbers), max(numbers)
        at = {v: next(str(r[table.label]) for r in present if r[by] == v) for v in (low, high)}
        extremes = {"min": {"value": low, "row": at[low]}, "max": {"value": high, "row": at[high]}}
        bars = [None if r.get(by) is None else (1.0 if high == low else (r[by] - low) / (high - low)) for r in ordered]
    return {"columns": [{"key": c, "label": LABELS.get(c, c.replace("_", " "))} for c in table.columns],
            "label": table.label, "sort": {"by": by, "descending": descending},
            "rows": [{"rank": i + 1, "values": r, "bar": bar} for i, (r, bar) in enumerate(zip(ordered, bars))],
            "extremes": extremes}


class RunShelf:
    """The run roots given at start-up; every lookup re-reads the listing."""

    def __init__(self, roots: list[str | Path]) -> None:
        self.roots = [Path(r) for r in roots]

    def runs(self) -> dict[str, Run]:
        return find_runs(self.roots)

    def get(self, name: str) -> Run:
        runs = self.runs()
        if name not in runs:
            raise RequestError(f"no run {name!r}: the runs found under {[str(r) for r in self.roots]} are "
                               f"{list(runs) or 'none'}", 404)
        return runs[name]

    def figure(self, name: str, file: str) -> Path:
        """The path of figure ``file`` of run ``name``, if it is in the run's listing."""
        found = figures(self.get(name))
        if file not in found:
            raise RequestError(f"run {name!r} has no figure {file!r}: its figures are {list(found) or 'none'}", 404)
        return found[file]
