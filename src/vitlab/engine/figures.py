"""Evaluation figures, reliability diagram and confusion matrix, drawn on matplotlib ``Figure`` objects
(no pyplot, no global backend)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure

from ..plotting import fit, map_colorbar


def plot_reliability(bins: dict, path: str | Path, calibrated: dict | None = None, title: str = "") -> None:
    """Bars of accuracy per confidence bin against the diagonal, from :func:`metrics.reliability`
    data; ``calibrated`` (same form, after temperature scaling) is drawn as outlined bars."""
    edges = bins["edges"]
    width = edges[1] - edges[0]
    fig = Figure(figsize=(4.5, 4.5))
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfect calibration")
    acc = [a if a is not None else 0.0 for a in bins["accuracy"]]
    ax.bar(edges[:-1], acc, width=width, align="edge", edgecolor="black", alpha=0.7, label="accuracy")
    if calibrated is not None:
        cal = [a if a is not None else 0.0 for a in calibrated["accuracy"]]
        ax.bar(
            edges[:-1],
            cal,
            width=width,
            align="edge",
            fill=False,
            edgecolor="tab:red",
            linewidth=1.5,
            label="after temperature scaling",
        )
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="confidence", ylabel="accuracy")
    ax.set_title(fit(title or "reliability", 4.0, 10), fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_confusion(
    confusion: Sequence[Sequence[int]], classes: Sequence[str], path: str | Path, title: str = ""
) -> None:
    """The confusion matrix (rows true, columns predicted) as a heat map with counts and a colour bar on their
    range."""
    k = len(classes)
    fig = Figure(figsize=(max(4.0, 0.45 * k + 1.5) + 1, max(4.0, 0.45 * k + 1.5)))
    ax = fig.subplots()
    map_colorbar(fig, [ax.imshow(confusion, cmap="Blues")], ax, "images", fontsize=8)
    if k <= 30:
        peak = max(max(row) for row in confusion) or 1
        for i, row in enumerate(confusion):
            for j, count in enumerate(row):
                if count:
                    ax.text(
                        j,
                        i,
                        str(count),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if count > peak / 2 else "black",
                    )
        ax.set_xticks(range(k), classes, rotation=90, fontsize=7)
        ax.set_yticks(range(k), classes, fontsize=7)
    ax.set(xlabel="predicted", ylabel="true")
    ax.set_title(fit(title or "confusion", fig.get_figwidth() - 1.5, 10), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
