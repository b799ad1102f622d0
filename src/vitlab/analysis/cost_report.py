"""The report ``vitlab cost`` prints: the cost model's rows for some (image, patch) pairs as a table (or JSON),
a FLOPs and a memory column per other kind of attention, the token pairs one 3x3 convolution mixes against
full attention's ``N^2``, and optionally a log-log figure against resolution."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..reporting import aligned_table
from .cost import TEXTBOOK_PAIRS, CostRow, Interactions, cost_figure, cost_table, interactions

PLOT_SIDES = (224, 320, 448, 640, 896, 1024, 1536, 2048)  # a plot without image sides: these, at patch 16
FLOPS = (("", "K", "M", "G", "T", "P"), 1000)
MEMORY = (("B", "KiB", "MiB", "GiB", "TiB"), 1024)


def scaled(value: float, units: tuple[str, ...], step: int) -> str:
    """``1843968, ("B", "KiB", ...), 1024 -> "1.8 MiB"``."""
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:.0f} {unit}" if unit == units[0] else f"{value:.1f} {unit}"
        value /= step
    return f"{value:.1f} {units[-1]}"


def select_pairs(
    pairs: Sequence[tuple[int, int]] | None,
    images: Sequence[int] | None,
    patches: Sequence[int] | None,
    plot: bool = False,
) -> tuple[tuple[int, int], ...]:
    """The (image, patch) pairs asked for: ``pairs``, every image x patch, or the textbook's; for a plot
    without either, :data:`PLOT_SIDES` at the given patches (default 16)."""
    if plot and not (pairs or images):
        images, patches = list(PLOT_SIDES), patches or [16]
    if pairs and (images or patches):
        raise ConfigError("give either --pairs or --image/--patch, not both")
    if bool(images) != bool(patches):
        raise ConfigError(
            "--image and --patch go together (every image with every patch); or give --pairs 224/16,224/8"
        )
    if pairs:
        return tuple(pairs)
    if images and patches:
        return tuple(itertools.product(images, patches))
    return TEXTBOOK_PAIRS


def _settings_text(sizes: dict[str, Any], priced: bool) -> list[str]:
    """The lines above the table: the encoder's sizes and what the columns count (``priced``: with columns
    for other kinds of attention)."""
    return [
        f"ViT dim={sizes['dim']} depth={sizes['depth']} heads={sizes['heads']} mlp_ratio={sizes['mlp_ratio']} "
        f"channels={sizes['in_chans']} batch={sizes['batch']}" + (" + class token" if sizes["class_token"] else ""),
        "entries: attention scores per head per layer (N^2); FLOPs: forward, 2 per multiply-add;\n"
        "scores: B x H x N x N at fp32, one layer"
        + (
            f"; per other kind, its FLOPs and attention memory (window {sizes['window_size']}, low-rank k "
            f"{sizes['lowrank_k']}, {sizes['num_latents']} latents; sparse: band "
            f"{sizes['sparse_local'] or 'grid width'}, stride {sizes['sparse_stride'] or 'grid width'}; "
            f"linear: its d x d state)"
            if priced
            else ""
        ),
    ]


def _cost_lines(rows: list[CostRow], others: dict[str, list[CostRow]]) -> list[str]:
    """The cost table: one line per pair, then a FLOPs and a memory column per kind in ``others``."""
    header = ("image", "patch", "tokens", "entries", "vs first", "FLOPs", "scores") + tuple(
        f"{what} {kind}" for kind in others for what in ("FLOPs", "mem")
    )
    body = [
        (
            f"{r.image}x{r.image}",
            str(r.patch),
            f"{r.tokens:,}",
            f"{r.entries:,}",
            f"{r.ratio:,.1f}x",
            scaled(r.flops, *FLOPS),
            scaled(r.attention_memory, *MEMORY),
        )
        + tuple(
            cell
            for t in others.values()
            for cell in (scaled(t[i].flops, *FLOPS), scaled(t[i].attention_memory, *MEMORY))
        )
        for i, r in enumerate(rows)
    ]
    return aligned_table(header, body)


def _interaction_lines(mixed: list[Interactions]) -> list[str]:
    """The paragraph and table of token pairs a 3x3 convolution and full attention mix."""
    return [
        "\npairs that interact in one layer, on the same patch grid (class token left out): a 3x3 convolution\n"
        "mixes each token with its 3x3 neighbourhood (exact count, cut at the borders; 9N inside), full attention\n"
        "every token with every token (N^2)",
        *aligned_table(
            ("tokens N", "grid", "3x3 conv", "9N", "attention N^2", "attention / conv"),
            [
                (
                    f"{m.tokens:,}",
                    f"{m.grid[0]}x{m.grid[1]}",
                    f"{m.conv3x3:,}",
                    f"{m.interior_9n:,}",
                    f"{m.attention:,}",
                    f"{m.attention / m.conv3x3:,.1f}x",
                )
                for m in mixed
            ],
        ),
    ]


def _save_plot(
    pairs: tuple[tuple[int, int], ...], kinds: Sequence[str], sizes: dict[str, Any], plot: str | Path
) -> None:
    """Draw :func:`cost_figure` for ``pairs`` (one patch size) into the PNG ``plot``."""
    patches = sorted({patch for _, patch in pairs})
    if len(patches) != 1:
        raise ConfigError(
            f"--plot draws against resolution at one patch size, got patches {patches}: "
            f"give --image 224,448,896 --patch 16"
        )
    images = tuple(sorted({image for image, _ in pairs}))
    cost_figure(images, patches[0], tuple(kinds), **sizes).savefig(plot, dpi=120)


def cost_report(
    sizes: dict[str, Any],
    kinds: Sequence[str] = ("full", "window", "linear"),
    *,
    pairs: Sequence[tuple[int, int]] | None = None,
    images: Sequence[int] | None = None,
    patches: Sequence[int] | None = None,
    as_json: bool = False,
    plot: str | Path | None = None,
) -> str:
    """The cost of the (image, patch) pairs :func:`select_pairs` picks, as text (or ``as_json``): the full
    attention table with a FLOPs and a memory column for each other kind in ``kinds``, and the token pairs
    a 3x3 convolution mixes against full attention. ``sizes`` are every :class:`~vitlab.analysis.cost.Workload`
    field but ``image`` and ``patch``. ``plot``: also draw memory and FLOPs against the image side into this PNG."""
    chosen = select_pairs(pairs, images, patches, plot=bool(plot))
    rows = cost_table(chosen, **sizes)
    others = {kind: cost_table(chosen, attention=kind, **sizes) for kind in kinds if kind != "full"}
    if plot:
        _save_plot(chosen, kinds, sizes, plot)
    mixed = [interactions(image, patch) for image, patch in chosen]
    if as_json:
        report = {
            "settings": sizes,
            "rows": [r.to_dict() for r in rows],
            "attention": {kind: [r.to_dict() for r in table] for kind, table in others.items()},
            "interactions": [m.to_dict() for m in mixed],
        }
        return json.dumps(report, indent=2)
    lines = [*_settings_text(sizes, bool(others)), *_cost_lines(rows, others), *_interaction_lines(mixed)]
    return "\n".join(lines + ([f"wrote {plot}"] if plot else []))
