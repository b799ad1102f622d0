"""Segmentation heads side by side, by patch size: ``compare_heads(...) -> list of rows``
(``vitlab compare --task segment``).

The textbook's prediction: a per-patch linear head can only paint whole patches (softened by
bilinear upsampling), so it loses detail at object boundaries, more so for larger patches; a decoder
with skip connections recovers it. Each row reports mean IoU, pixel accuracy and the accuracy on the
boundary band (pixels next to a class change).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..data import load_dense_dataset
from ..data.shapes import SHAPES_COUNT
from ..errors import DataError
from .files import open_study, write_file
from .training import DenseTrainConfig, dense_run

# ``vitlab compare --task segment``'s defaults.
HEADS = ("linear", "decoder")
PATCHES = (4, 8, 16)
EPOCHS = 30


def compare_heads(
    heads: Sequence[str] = HEADS,
    patches: Sequence[int] = PATCHES,
    config: DenseTrainConfig | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every (patch, head) pair on the same split and seed, each ``config`` (default: a
    :class:`~vitlab.tasks.dense.DenseTrainConfig`'s own, the shapes dataset for :data:`EPOCHS` epochs) with that
    head and ``model.patch_size``; rows of ``head``, ``patch``, ``mean_iou``, ``pixel_acc``, ``boundary_acc`` (test
    split), ``params``, ``seconds``. Every setting is checked (as a config) before the data is made."""
    base = DenseTrainConfig() if config is None else config
    configs = [
        replace(base, task="segment", head=head, model={**base.model, "patch_size": patch})
        for patch in patches
        for head in heads
    ]
    dataset, data_dir, seed = base.dataset, base.data_dir, base.seed
    splits = load_dense_dataset(dataset, data_dir, seed=seed, image_size=base.image_size, count=base.count)
    rows = []
    for cfg in configs:
        r = dense_run(cfg, splits)
        if r.test is None:
            raise DataError(f"the {dataset} data has no test split to score the heads on")
        row = {
            "head": cfg.head,
            "patch": cfg.model["patch_size"],
            **{k: r.test[k] for k in ("mean_iou", "pixel_acc", "boundary_acc")},
            "params": r.params,
            "seconds": round(r.seconds, 1),
        }
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def heads_table(rows: list[dict[str, Any]]) -> str:
    """A markdown table of :func:`compare_heads` rows."""
    lines = [
        "| patch | head | mean IoU | pixel acc | boundary acc | params | train s |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['patch']} | {r['head']} | {r['mean_iou']:.3f} | {r['pixel_acc']:.3f} | {r['boundary_acc']:.3f} "
        f"| {r['params']:,} | {r['seconds']} |"
        for r in rows
    ]
    return "\n".join(lines)


def head_line(row: dict[str, Any]) -> str:
    """A progress line for one :func:`compare_heads` row: ``linear patch 8: mean IoU 0.5123 (12.3s)``."""
    return f"{row['head']} patch {row['patch']}: mean IoU {row['mean_iou']:.4f} ({row['seconds']}s)"


def segment_study(
    out: str | Path, options: Mapping[str, Any], say: Callable[[str], None] | None = None
) -> tuple[str, Path]:
    """``vitlab compare --task segment``: :func:`compare_heads` in the study folder ``out`` (refused when
    it holds another study, unless ``options["overwrite"]``). ``options`` are the command's ``head``,
    ``patches``, ``dataset``, ``data_dir``, ``epochs``, ``minutes`` and ``device``, a missing one or ``None``
    standing for its default (heads :data:`HEADS`, patches :data:`PATCHES`, the shapes dataset, :data:`EPOCHS`
    epochs, no time limit (``minutes`` per run otherwise), the CPU for ``auto``); ``say`` hears a line per trained
    head. Returns the markdown table and the path of ``heads.md`` it was written to."""
    out = Path(out)
    minutes, device, epochs = options.get("minutes"), options.get("device"), options.get("epochs")
    with open_study(out, {"study": "segment heads"}, bool(options.get("overwrite"))):
        config = DenseTrainConfig(
            dataset=options.get("dataset") or "shapes",
            data_dir=options.get("data_dir"),
            count=SHAPES_COUNT,
            epochs=EPOCHS if epochs is None else epochs,
            time_limit_s=None if minutes is None else minutes * 60,
            device="cpu" if device in (None, "auto") else device,
        )
        rows = compare_heads(
            options.get("head") or list(HEADS),
            options.get("patches") or list(PATCHES),
            config,
            progress=None if say is None else (lambda row: say(head_line(row))),
        )
        table = heads_table(rows)
        return table, write_file(out / "heads.md", table + "\n")
