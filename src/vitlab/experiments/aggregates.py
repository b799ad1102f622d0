"""A study's runs averaged over seeds: one :class:`Aggregate` per model and cell, one
:class:`Lead` per cell (its ViT against its CNN).
Definitions used throughout:

- **gap** = final training accuracy - best validation accuracy (see :class:`~.compare.RunRecord`).
- **lead** of a cell = mean over seeds of (ViT best val acc - CNN best val acc), the two models of
  each seed trained on the same split; positive means the ViT is ahead.
- **spread** = the sample standard deviation (n - 1) of those per-seed differences; unknown with one
  seed. A lead is "larger than the spread" when ``|lead| > spread``, else "within the spread".
- **robustness** (with ``CompareConfig.robustness``): accuracy with a share of the patches masked and
  with centre crops (see :mod:`~vitlab.explain.robustness`), averaged over seeds like the rest.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .records import CompareResult, RunRecord

# Per-run metrics (fields of RunRecord), in the order the tables show them.
METRICS = (
    "params",
    "best_val_acc",
    "final_val_acc",
    "final_train_acc",
    "gap",
    "val_ece",
    "test_acc",
    "seconds",
    "images_per_s",
    "peak_mb",
    "agreement",
    "train_eval_acc",
    "permuted_agreement",
    "unpositioned_agreement",
)


@dataclass
class Aggregate:
    """One model in one cell, over its seeds: ``mean`` / ``std`` per metric of :data:`METRICS`
    (``std`` is ``None`` with one seed, a metric's entries ``None`` where the runs have no value),
    the mean learning curves, and per patch grid its robustness (``{"patch", "mean", "std"}``, empty
    when not measured)."""

    kind: str
    label: str
    axes: dict[str, Any]
    train_rows: int
    seeds: int
    mean: dict[str, float | None]
    std: dict[str, float | None]
    curves: dict[str, list[float]]
    robustness: list[dict[str, Any]] = field(default_factory=list)

    def known_mean(self, metric: str) -> float:
        """``mean[metric]`` for a metric every run records (accuracies, gap, ECE)."""
        return known(self.mean, metric)


@dataclass
class Lead:
    """A cell's ViT against its CNN: their aggregates' means, the lead in best validation accuracy,
    its seed-to-seed ``spread`` (``None`` with one seed) and the number of ``seeds``."""

    axes: dict[str, Any]
    train_rows: int
    vit_label: str
    cnn_label: str
    vit: dict[str, float | None]
    cnn: dict[str, float | None]
    lead: float
    spread: float | None
    seeds: int

    @property
    def leader(self) -> str:
        """``"ViT"``, ``"CNN"`` or ``"tie"``."""
        return "ViT" if self.lead > 0 else "CNN" if self.lead < 0 else "tie"

    @property
    def verdict(self) -> str:
        """``"larger than the spread"``, ``"within the spread"`` or ``"spread unknown"``."""
        if self.spread is None:
            return "spread unknown"
        return "larger than the spread" if abs(self.lead) > self.spread else "within the spread"


def known(means: Mapping[str, float | None], metric: str) -> float:
    """``means[metric]`` for a metric every run records (accuracies, gap, ECE), where a None is a bug."""
    value = means[metric]
    if value is None:
        raise ValueError(f"no mean {metric!r}: every run records it, so its records are malformed")
    return value


def _spread(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    present = [v for v in values if v is not None]
    if len(present) < len(values):
        return None, None
    return statistics.fmean(present), _spread(present)


def _without_seed(axes: dict[str, Any]) -> tuple:
    return tuple((k, v) for k, v in axes.items() if k != "seed")


def aggregate(records: Sequence[RunRecord]) -> list[Aggregate]:
    """Group runs by model and cell (every axis but the seed) and average each metric over seeds;
    ordered by setting of the shared axes (first seen first), ViTs before the CNN within each."""
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.label, _without_seed(record.axes)), []).append(record)
    out = []
    for (label, axes), runs in groups.items():
        stats = {metric: _mean_std([getattr(r, metric) for r in runs]) for metric in METRICS}
        epochs = min(len(r.curves["val_acc"]) for r in runs)
        curves = {
            name: [statistics.fmean(r.curves[name][e] for r in runs) for e in range(epochs)] for name in runs[0].curves
        }
        out.append(
            Aggregate(
                runs[0].kind,
                label,
                dict(axes),
                runs[0].train_rows,
                len(runs),
                {m: s[0] for m, s in stats.items()},
                {m: s[1] for m, s in stats.items()},
                curves,
                _robustness_over_seeds(runs),
            )
        )
    shared = {k for a in out if a.kind == "cnn" for k in a.axes}
    settings: dict[tuple, int] = {}
    for a in out:
        settings.setdefault(tuple(v for k, v in a.axes.items() if k in shared), len(settings))
    return sorted(out, key=lambda a: (settings[tuple(v for k, v in a.axes.items() if k in shared)], a.kind != "vit"))


def _robustness_over_seeds(runs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Per patch grid, the mean and std over ``runs`` (one model's seeds) of each robustness accuracy."""
    if any(r.robustness is None for r in runs):
        return []
    out = []
    for i, entry in enumerate(cast(list, runs[0].robustness)):
        stats = {k: _mean_std([cast(list, r.robustness)[i][k] for r in runs]) for k in entry if k != "patch"}
        out.append(
            {
                "patch": entry["patch"],
                "mean": {k: v[0] for k, v in stats.items()},
                "std": {k: v[1] for k, v in stats.items()},
            }
        )
    return out


def compute_leads(result: CompareResult) -> list[Lead]:
    """One :class:`Lead` per cell (seeds pooled), in grid order."""
    by_cell: dict[tuple, list[tuple[RunRecord, RunRecord]]] = {}
    for cell in result.plan.cells:
        pair = (result.records[cell.vit], result.records[cell.cnn])
        by_cell.setdefault(_without_seed(cell.axes), []).append(pair)
    aggregates = {(a.label, _without_seed(a.axes)): a for a in aggregate(list(result.records.values()))}
    leads = []
    for axes, pairs in by_cell.items():
        vit_run, cnn_run = pairs[0]
        vit = aggregates[vit_run.label, _without_seed(vit_run.axes)]
        cnn = aggregates[cnn_run.label, _without_seed(cnn_run.axes)]
        diffs = [v.best_val_acc - c.best_val_acc for v, c in pairs]
        leads.append(
            Lead(
                dict(axes),
                vit_run.train_rows,
                vit.label,
                cnn.label,
                vit.mean,
                cnn.mean,
                statistics.fmean(diffs),
                _spread(diffs),
                len(pairs),
            )
        )
    return leads
