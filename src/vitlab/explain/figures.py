"""Explanation figures, drawn on matplotlib ``Figure`` objects (no pyplot, no global backend) to PNG.

Every figure has a fixed size in inches saved at :data:`DPI` (no tight bounding box), so its pixel
size is known in advance: ``width_in * DPI x height_in * DPI``. Maps over the patch grid are drawn
over the image they explain, one patch per cell.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.image import AxesImage

from ..plotting import fit, map_colorbar, picture
from .maps import Query

DPI = 100
PANEL = 2.0  # inches per image panel


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI)
    return path


def _show_image(ax: Axes, image: torch.Tensor) -> tuple[int, int]:
    """Draw an image ``(C, H, W)`` in [0, 1] (grey for one channel) as a :func:`~vitlab.plotting.picture`;
    returns ``(H, W)``."""
    pixels = image.detach().float().cpu().clamp(0, 1)
    if pixels.shape[0] == 1:
        picture(ax.imshow(pixels[0].numpy(), cmap="gray", vmin=0, vmax=1))
    else:
        picture(ax.imshow(pixels[:3].permute(1, 2, 0).numpy()))
    ax.set_xticks([])
    ax.set_yticks([])
    height, width = pixels.shape[-2:]
    return height, width


def _overlay(ax: Axes, image: torch.Tensor, grid_map: torch.Tensor, patch: int | None = None) -> AxesImage:
    """The image with a map ``(gh, gw)`` drawn over it, one cell per ``patch``-pixel patch (default:
    cells that cover the image); returns the map's image, to be given its scale."""
    h, w = _show_image(ax, image)
    gh, gw = grid_map.shape
    extent = (-0.5, gw * patch - 0.5, gh * patch - 0.5, -0.5) if patch else (-0.5, w - 0.5, h - 0.5, -0.5)
    shown = ax.imshow(
        grid_map.detach().float().cpu().numpy(), cmap="inferno", alpha=0.6, extent=extent, interpolation="nearest"
    )
    ax.set_xlim(-0.5, w - 0.5)
    ax.set_ylim(h - 0.5, -0.5)
    return shown


def query_words(query: Query | None) -> str:
    """How a figure names the query whose attention it shows: ``"query: the class token"``, ``"query: the mean
    of the patch queries"``, ``"query: patch 5"``."""
    if query is None:
        return ""
    words = {"cls": "the class token", "mean": "the mean of the patch queries"}
    return f"query: {words.get(str(query), f'patch {query}')}"


def _suptitle(fig: Figure, title: str, width_in: float, fontsize: float = 8) -> None:
    if title:
        fig.suptitle(fit(title, width_in, fontsize), fontsize=fontsize)


def plot_maps(
    image: torch.Tensor,
    maps: Mapping[str, torch.Tensor],
    path: str | Path,
    title: str = "",
    patch: int | None = None,
    query: Query | None = None,
) -> Path:
    """The image ``(C, H, W)`` and each named map ``(gh, gw)`` over it, side by side, each with a colour bar on
    its own range (the methods' units differ); the attention maps' ``query`` is named in the title.

    Size: ``PANEL * (1 + len(maps)) * 1.25`` by ``PANEL + 1.4`` inches.
    """
    width = PANEL * (1 + len(maps)) * 1.25
    fig = Figure(figsize=(width, PANEL + 1.4), layout="constrained")
    axes = fig.subplots(1, 1 + len(maps), squeeze=False)
    _show_image(axes[0, 0], image)
    axes[0, 0].set_title("image", fontsize=8)
    for ax, (name, grid_map) in zip(axes[0, 1:], maps.items()):
        shown = _overlay(ax, image, grid_map, patch)
        ax.set_title(name, fontsize=8)
        map_colorbar(fig, [shown], ax, "attention weight" if name in ("attention", "rollout") else name, fontsize=6)
    words = query_words(query) if any(name in ("attention", "rollout") for name in maps) else ""
    _suptitle(fig, "; ".join(t for t in (title, words) if t), width)
    return _save(fig, path)


def plot_head_attention(
    image: torch.Tensor,
    maps: torch.Tensor,
    path: str | Path,
    title: str = "",
    patch: int | None = None,
    stats: Mapping[str, torch.Tensor] | None = None,
    query: Query | None = None,
) -> Path:
    """Per-layer, per-head attention ``(L, H, gh, gw)`` from ``query`` over the image, on one colour scale (the
    weights' range over every panel, in one colour bar); each panel titled with its head's most-attended key's
    weight and its spread, max − min (``stats["max"]``, ``stats["spread"]``: ``(L, H)``, when given).

    Size: ``PANEL * (1 + H) + 1`` by ``PANEL * L + 1`` inches.
    """
    layers, heads = maps.shape[:2]
    width = PANEL * (1 + heads) + 1
    fig = Figure(figsize=(width, PANEL * layers + 1), layout="constrained")
    axes = fig.subplots(layers, 1 + heads, squeeze=False)
    shown = []
    for layer in range(layers):
        _show_image(axes[layer, 0], image)
        axes[layer, 0].set_ylabel(f"layer {layer if layers > 1 else 'last'}", fontsize=8)
        for head in range(heads):
            ax = axes[layer, 1 + head]
            shown.append(_overlay(ax, image, maps[layer, head], patch))
            words = f"head {head}"
            if stats is not None:
                words += (
                    f"\nmax {float(stats['max'][layer, head]):.3f}, max−min {float(stats['spread'][layer, head]):.3f}"
                )
            ax.set_title(fit(words, PANEL, 7), fontsize=7)
    map_colorbar(fig, shown, axes[:, 1:], "attention weight")
    _suptitle(fig, "; ".join(t for t in (title, query_words(query)) if t), width)
    return _save(fig, path)


def plot_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], path: str | Path, title: str = "") -> Path:
    """Mean deletion and insertion curves per ordering (``{name: {"deletion": [...], "insertion": [...]}}``)
    against the fraction of patches removed or revealed. Size: 9 x 3.6 inches."""
    fig = Figure(figsize=(9, 3.6))
    axes = fig.subplots(1, 2)
    for ax, kind in zip(axes, ("deletion", "insertion")):
        for name, curve in curves.items():
            ys = np.asarray(curve[kind])
            ax.plot(np.linspace(0, 1, len(ys)), ys, label=name, linestyle="--" if name == "random" else "-")
        ax.set(
            xlabel=f"fraction of patches {'removed' if kind == 'deletion' else 'revealed'}",
            ylabel="predicted-class probability",
            title=kind,
            ylim=(0, 1),
        )
    axes[1].legend(fontsize=7)
    _suptitle(fig, title, 9, 9)
    fig.tight_layout()
    return _save(fig, path)


def plot_cascade(
    cascade: Mapping[str, Sequence[float | None]],
    stages: Sequence[str],
    path: str | Path,
    threshold: float | None = None,
) -> Path:
    """Rank correlation with the trained model's map as the weights are randomised stage by stage,
    head first. Size: 7 x 3.6 inches."""
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    for name, values in cascade.items():
        ax.plot(range(len(stages)), [np.nan if v is None else v for v in values], marker="o", label=name)
    if threshold is not None:
        ax.axhline(threshold, color="grey", linestyle=":", label="threshold")
    ax.set_xticks(range(len(stages)), stages, rotation=90, fontsize=7)
    ax.set(ylabel="Spearman ρ with trained map", ylim=(-1, 1), title="cascading randomisation (head first)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_position_similarity(tables: Mapping[str, torch.Tensor], grid: tuple[int, int], path: str | Path) -> Path:
    """For each named position table ``(gh*gw, D)``: the cosine similarity of every position with
    every other, as a grid of small grids (panel ``(r, c)`` shows position ``(r, c)``'s similarity
    to all positions). Size: ``3.2 * len(tables)`` by 3.6 inches."""
    from .maps import position_similarity

    gh, gw = grid
    fig = Figure(figsize=(3.2 * len(tables) + 1, 3.6), layout="constrained")
    axes = fig.subplots(1, len(tables), squeeze=False)
    shown = []
    for ax, (name, table) in zip(axes[0], tables.items()):
        sim = position_similarity(table).reshape(gh, gw, gh, gw)
        mosaic = np.full((gh * (gh + 1), gw * (gw + 1)), np.nan)
        for r in range(gh):
            for c in range(gw):
                mosaic[r * (gh + 1) : r * (gh + 1) + gh, c * (gw + 1) : c * (gw + 1) + gw] = sim[r, c].numpy()
        shown.append(ax.imshow(mosaic, cmap="viridis", interpolation="nearest"))
        ax.set_title(name, fontsize=9)
        ax.set_xticks([])
        ax.set_yticks([])
    map_colorbar(fig, shown, axes[0].tolist(), "cosine similarity")
    return _save(fig, path)


def plot_matrices(matrices: Mapping[str, torch.Tensor], path: str | Path, title: str = "") -> Path:
    """Named ``(N, N)`` attention matrices side by side (rows queries, columns keys).
    One colour bar on the weights' range. Size: ``3 * len(matrices) + 1`` by 3.6 inches."""
    width = 3 * len(matrices) + 1
    fig = Figure(figsize=(width, 3.6), layout="constrained")
    axes = fig.subplots(1, len(matrices), squeeze=False)
    shown = []
    for ax, (name, matrix) in zip(axes[0], matrices.items()):
        shown.append(ax.imshow(matrix.detach().cpu().numpy(), cmap="viridis", interpolation="nearest"))
        ax.set(title=name, xlabel="key", ylabel="query")
    map_colorbar(fig, shown, axes[0].tolist(), "attention weight")
    _suptitle(fig, title, width, 9)
    return _save(fig, path)


def plot_temperature_sweep(weights: torch.Tensor, temperatures: Sequence[float], path: str | Path) -> Path:
    """One query's softmax weights ``(T, N)`` at each temperature, against the uniform ``1/N``.
    Size: 7 x 3.6 inches."""
    fig = Figure(figsize=(7, 3.6))
    ax = fig.subplots()
    n = weights.shape[-1]
    width = 0.8 / len(temperatures)
    for i, (row, t) in enumerate(zip(weights, temperatures)):
        ax.bar(np.arange(n) + (i - (len(temperatures) - 1) / 2) * width, row.cpu().numpy(), width, label=f"T = {t:g}")
    ax.axhline(1.0 / n, color="black", linestyle=":", label=f"uniform 1/N = {1.0 / n:.4f}")
    ax.set(xlabel="key", ylabel="attention weight", title="softmax temperature: lower is sharper")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)


def plot_attention_depth(diagnostics: Mapping[str, object], path: str | Path, title: str = "") -> Path:
    """Mean attention distance per head against depth (dots), its mean over heads and the rollout's
    distance (lines), uniform attention's distance (dashed); or, for a convnet, the mean distance within
    its receptive field by layer. Size: 5.5 x 3.6 inches."""
    fig = Figure(figsize=(5.5, 3.6))
    ax = fig.subplots()
    fields = diagnostics.get("receptive_fields")
    if isinstance(fields, list):
        ax.plot(range(1, len(fields) + 1), [f["field_distance"] for f in fields], marker="o", label="receptive field")
        ax.set(xlabel="conv / pool layer", ylabel="mean distance within the field (px)")
    else:
        distance = np.asarray(diagnostics["mean_distance"], dtype=float)  # (L, H)
        depth = np.arange(1, len(distance) + 1)
        for head in range(distance.shape[1]):
            ax.scatter(
                depth, distance[:, head], s=14, alpha=0.6, color="tab:blue", label="heads" if head == 0 else None
            )
        ax.plot(depth, distance.mean(1), marker="o", color="tab:blue", label="mean over heads")
        ax.plot(depth, np.asarray(diagnostics["rollout_distance"]), marker="s", color="tab:orange", label="rollout")
        ax.axhline(float(diagnostics["uniform_distance"]), color="grey", linestyle="--", label="uniform attention")  # type: ignore[arg-type]
        ax.set(xlabel="layer", ylabel="mean attention distance (px)")
        ax.set_xticks(depth)
    ax.set_title(fit(title, 5, 9), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, path)
