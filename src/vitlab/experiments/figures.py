"""A comparison's figures (matplotlib ``Figure`` objects, no pyplot, no global backend), drawn from
the per-cell aggregates.

- ``plot_accuracy_vs_rows``: best validation accuracy against training rows, one line per model
  (each ViT patch size, each matched CNN), one panel per setting of the other shared axes (augment).
- ``plot_learning_curves``: validation (solid) and training (dashed) accuracy per epoch, mean over
  seeds, one panel per training-set size and setting.
- ``plot_gap``: the train − validation gap per model, grouped by training-set size and setting.

Error bars are one standard deviation over seeds (none with one seed).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..plotting import fit
from .aggregates import Aggregate
from .axes import VARIANTS, augment_words
from .files import write_file

# Axes that tell models apart within a panel (the ViT-only ones, the CNN met) or that the x-axis spans.
_MODEL_AXES = ("patch", *VARIANTS, "cnn", "seed")


def _setting(a: Aggregate, also_drop: Sequence[str] = ()) -> tuple[tuple[str, Any], ...]:
    return tuple((k, v) for k, v in a.axes.items() if k not in _MODEL_AXES and k not in also_drop)


def _title(setting: tuple[tuple[str, Any], ...], rows: dict[Any, int] | None = None) -> str:
    parts = []
    for name, value in setting:
        if name == "rows":
            parts.append(f"{rows[value]:,} rows" if rows else f"rows {value}")
        elif name == "augment":
            parts.append(augment_words(value).removeprefix("the "))
        else:
            parts.append(f"{name} {value}")
    return ", ".join(parts) or "all runs"


def _colours(labels: Sequence[str]) -> dict[str, Any]:
    """A fixed colour per model label: ViTs from a blue-green ramp, CNNs in warm colours."""
    vits = [label for label in labels if label.startswith("ViT")]
    cnns = [label for label in labels if not label.startswith("ViT")]
    out = {label: colormaps["viridis"](0.15 + 0.6 * i / max(1, len(vits) - 1)) for i, label in enumerate(vits)}
    out.update({label: colormaps["autumn"](0.6 * i / max(1, len(cnns) - 1)) for i, label in enumerate(cnns)})
    return out


def _panels(count: int, width: float = 4.2, height: float = 3.4) -> tuple[Any, list[Any]]:
    cols = min(count, 3)
    rows = -(-count // cols)
    fig = Figure(figsize=(width * cols, height * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[count:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:count])


def _save(fig: Figure, path: str | Path) -> None:
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    write_file(path, png.getvalue())


def _unique(values: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(values))


def _errors(stds: Sequence[float | None]) -> list[float] | None:
    """Error bar lengths, or None (no bars) when no value has a spread (one seed)."""
    return None if all(s is None for s in stds) else [s or 0.0 for s in stds]


def _labels(aggregates: Sequence[Aggregate]) -> list[str]:
    """Model labels in first-seen order, ViTs before CNNs."""
    return sorted(_unique(a.label for a in aggregates), key=lambda label: not label.startswith("ViT"))


def plot_accuracy_vs_rows(aggregates: Sequence[Aggregate], path: str | Path) -> None:
    """Best validation accuracy (mean ± std over seeds) against training rows, per model."""
    settings = _unique(_setting(a, ("rows",)) for a in aggregates)
    colours = _colours(_labels(aggregates))
    fig, panels = _panels(len(settings))
    for ax, setting in zip(panels, settings):
        members = [a for a in aggregates if _setting(a, ("rows",)) == setting]
        for label in _labels(members):
            points = sorted(
                (a.train_rows, a.mean["best_val_acc"], a.std["best_val_acc"]) for a in members if a.label == label
            )
            xs, ys, errs = zip(*points)
            ax.errorbar(
                xs,
                ys,
                yerr=_errors(errs),
                marker="o",
                capsize=3,
                color=colours[label],
                label=label,
                linestyle="-" if label.startswith("ViT") else "--",
            )
        ax.set_xscale("log")
        ticks = sorted({a.train_rows for a in members})
        ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
        ax.minorticks_off()
        ax.set(xlabel="training rows", ylabel="best validation accuracy", title=_title(setting))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    _save(fig, path)


def plot_learning_curves(aggregates: Sequence[Aggregate], path: str | Path) -> None:
    """Validation (solid) and training (dashed) accuracy per epoch, mean over seeds, per model."""
    settings = _unique(_setting(a) for a in aggregates)
    rows = {a.axes.get("rows"): a.train_rows for a in aggregates}
    colours = _colours(_labels(aggregates))
    fig, panels = _panels(len(settings))
    for ax, setting in zip(panels, settings):
        for a in (a for a in aggregates if _setting(a) == setting):
            epochs = range(1, len(a.curves["val_acc"]) + 1)
            marker = "o" if len(epochs) < 10 else None  # a line of one or two points needs dots
            ax.plot(epochs, a.curves["val_acc"], color=colours[a.label], marker=marker, label=f"{a.label} val")
            ax.plot(epochs, a.curves["train_acc"], color=colours[a.label], marker=marker, linestyle="--", alpha=0.6)
        ax.set(xlabel="epoch", ylabel="accuracy (dashed: train)", title=_title(setting, rows), ylim=(0, 1.02))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    _save(fig, path)


def plot_gap(aggregates: Sequence[Aggregate], path: str | Path) -> None:
    """Grouped bars: the train − validation gap (mean ± std) per model, one group per setting."""
    settings = _unique(_setting(a) for a in aggregates)
    rows = {a.axes.get("rows"): a.train_rows for a in aggregates}
    labels = _labels(aggregates)
    colours = _colours(labels)
    width = 0.8 / len(labels)
    fig = Figure(figsize=(max(5.0, 0.5 * len(settings) * len(labels) + 2.0), 3.8))
    ax = fig.subplots()
    for i, label in enumerate(labels):
        found = {
            j: a
            for j, setting in enumerate(settings)
            for a in aggregates
            if a.label == label and _setting(a) == setting
        }
        ax.bar(
            [j + (i - (len(labels) - 1) / 2) * width for j in found],
            [a.known_mean("gap") for a in found.values()],
            width,
            yerr=_errors([a.std["gap"] for a in found.values()]),
            capsize=3,
            color=colours[label],
            label=label,
        )
    ax.legend(fontsize=8)
    ax.axhline(0, color="black", linewidth=0.8)
    group = fig.get_figwidth() * 0.8 / max(1, len(settings))  # inches of axis per group
    ax.set_xticks(range(len(settings)), [fit(_title(s, rows), group, 8) for s in settings], fontsize=8)
    ax.set(ylabel="final train acc − best val acc", title="train − validation gap (higher: more overfitting)")
    ax.grid(axis="y", alpha=0.3)
    _save(fig, path)
