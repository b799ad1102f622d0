"""One figure style for every figure vitlab writes (matplotlib ``Figure`` objects, no pyplot, no global
backend): a map states its scale, text fits its box.

- :func:`map_colorbar`: the maps drawn with one colour scale get the data's range (min to max over all of them)
  and a colour bar whose label states that range, and says so when the maps are near-uniform (their spread
  below :data:`NEAR_UNIFORM` of their largest value), so a flat map never looks structured.
- :func:`fit`: a title or label wrapped to the width it has, so it is never cut or run into its neighbour.
- :func:`layout_problems` / :func:`scale_problems`: what a drawn figure gets wrong, measured from matplotlib's
  renderer extents (text overlapping other text or leaving the canvas) and its images (a map without a colour
  bar, or a colour scale other than its data's range).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text

NEAR_UNIFORM = 0.1  # maps whose max − min is below this share of their max are called near-uniform
PICTURE = "picture"  # the gid of an image shown as it is (no scale to state)
_CHAR_WIDTH = 0.6  # a character's mean width, in font sizes (matplotlib's DejaVu Sans)


def fit(text: str, width_in: float, fontsize: float) -> str:
    """``text`` wrapped into lines no wider than ``width_in`` inches at ``fontsize`` points."""
    chars = max(8, int(width_in * 72 / (fontsize * _CHAR_WIDTH)))
    return "\n".join(textwrap.fill(line, chars, break_long_words=False) for line in text.split("\n"))


def range_words(low: float, high: float) -> str:
    """``"range 0.0049 to 0.0052, near-uniform"``: a colour scale's range, and whether it is near-uniform."""
    flat = high - low <= NEAR_UNIFORM * max(abs(high), abs(low))
    return f"range {low:.3g} to {high:.3g}" + (", near-uniform" if flat else "")


def map_colorbar(fig: Figure, images: Sequence[AxesImage], axes: Any, label: str, fontsize: float = 7) -> Any:
    """Put ``images`` (maps drawn on one scale) on their data's range, min to max over all of them, and add one
    colour bar beside ``axes`` labelled with ``label`` and that range (:func:`range_words`)."""
    low, high = _data_range(images)
    norm = images[0].norm
    for image in images:
        image.set_norm(norm)  # one scale: a change to it is a change to every map on it
    images[0].set_clim(low, high if high > low else low + 1e-12)
    bar = fig.colorbar(images[0], ax=axes, shrink=0.9)
    bar.set_label(f"{label}\n{range_words(low, high)}", fontsize=fontsize)
    bar.ax.tick_params(labelsize=fontsize)
    return bar


def picture(image: AxesImage) -> AxesImage:
    """Mark ``image`` as a picture shown as it is (a photo under a map), which states no scale."""
    image.set_gid(PICTURE)
    return image


def _texts(fig: Figure) -> list[Text]:
    """The texts ``fig`` draws: every visible, non-empty text but the tick labels an axis does not draw (those
    outside its view)."""
    ticks: list[Text] = []
    drawn: list[Text] = []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            low, high = sorted(axis.get_view_interval())
            slack = 1e-9 * max(1.0, abs(low), abs(high))
            for tick in (*axis.get_major_ticks(), *axis.get_minor_ticks()):
                labels = [tick.label1, tick.label2]
                ticks += labels
                if ax.get_visible() and axis.get_visible() and low - slack <= tick.get_loc() <= high + slack:
                    drawn += labels
    seen: list[Text] = []
    for text in fig.findobj(Text):
        if not isinstance(text, Text) or (text in ticks and text not in drawn):
            continue
        if text.get_visible() and text.get_text().strip() and (text.axes is None or text.axes.get_visible()):
            if text not in seen:
                seen.append(text)
    return seen


def layout_problems(fig: Figure) -> list[str]:
    """Every text of ``fig`` that leaves the canvas or overlaps another text, after drawing it."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas_agg = FigureCanvasAgg(fig)  # what savefig draws PNGs with
    canvas_agg.draw()
    renderer = canvas_agg.get_renderer()
    canvas = fig.bbox
    boxes = [(text, text.get_window_extent(renderer)) for text in _texts(fig)]
    problems = []
    for text, box in boxes:
        if box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"{text.get_text()!r} leaves the canvas")
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            if box_a.overlaps(box_b) and _overlap(box_a, box_b) > 1.0:
                problems.append(f"{a.get_text()!r} overlaps {b.get_text()!r}")
    return problems


def _data_range(images: Sequence[AxesImage]) -> tuple[float, float]:
    """The smallest and largest value over ``images``' data."""
    arrays = [np.asarray(image.get_array()) for image in images]
    return min(float(a.min()) for a in arrays), max(float(a.max()) for a in arrays)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(b))


def _overlap(a: Any, b: Any) -> float:
    """The overlap of two boxes along their shorter side, in pixels."""
    return min(min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0))


def scale_problems(fig: Figure) -> list[str]:
    """Every map of ``fig`` (an image not marked :func:`picture`) drawn without a colour bar for its scale, or on
    a scale other than its data's range (min to max over the maps sharing it)."""
    maps = [im for ax in fig.axes for im in ax.get_images() if im.get_gid() != PICTURE]
    problems = []
    for image in maps:
        shared = [m for m in maps if m.norm is image.norm]
        if not any(m.colorbar is not None for m in shared):
            problems.append(f"a map in {image.axes.get_title()!r} has no colour bar")
            continue
        low, high = _data_range(shared)
        vmin, vmax = image.get_clim()
        if abs(vmin - low) > 1e-6 * max(1.0, abs(low)) or (
            high > low and abs(vmax - high) > 1e-6 * max(1.0, abs(high))
        ):
            problems.append(
                f"a map in {image.axes.get_title()!r} is scaled {vmin:.3g}..{vmax:.3g}, its data {low:.3g}..{high:.3g}"
            )
    return problems
