"""Segmentation heads side by side, by patch size: ``compare_heads(...) -> list of rows``
(``vitlab compare --task segment``).

The textbook's prediction: a per-patch linear head can only paint whole patches (softened by
bilinear upsampling), so it loses detail at object boundaries, more so for larger patches; a decoder
with skip connections recovers it. Each row reports mean IoU, pixel accuracy and the accuracy on the
boundary band (pixels next to a class change).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    *,
    dataset: str = "shapes",
    data_dir: str | None = None,
    count: int = SHAPES_COUNT,
    image_size: int = 64,
    epochs: int = EPOCHS,
    seed: int = 0,
    device: str = "auto",
    time_limit_s: float | None = None,
    model: dict[str, Any] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every (patch, head) pair on the same split and seed; rows of ``head``, ``patch``,
    ``mean_iou``, ``pixel_acc``, ``boundary_acc`` (test split), ``params``, ``seconds``. Every
    setting is checked (as a :class:`~vitlab.tasks.dense.DenseTrainConfig`) before the data is made."""
    configs = [
        DenseTrainConfig(
            task="segment",
            head=head,
            dataset=dataset,
            data_dir=data_dir,
            count=count,
            image_size=image_size,
            epochs=epochs,
            seed=seed,
            device=device,
            time_limit_s=time_limit_s,
            model={**(model or {}), "patch_size": patch},
        )
        for patch in patches
        for head in heads
    ]
    splits = load_dense_dataset(dataset, data_dir, seed=seed, image_size=image_size, count=count)
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
    out: str | Path,
    *,
    heads: Sequence[str] | None = None,
    patches: Sequence[int] | None = None,
    dataset: str | None = None,
    data_dir: str | None = None,
    epochs: int | None = None,
    minutes: float | None = None,
    device: str | None = None,
    overwrite: bool = False,
    say: Callable[[str], None] | None = None,
) -> tuple[str, Path]:
    """``vitlab compare --task segment``: :func:`compare_heads` in the study folder ``out`` (refused when
    it holds another study, unless ``overwrite``), ``None`` standing for the command's defaults (heads
    :data:`HEADS`, patches :data:`PATCHES`, the shapes dataset, :data:`EPOCHS` epochs, no time limit
    (``minutes`` per run otherwise), the CPU for ``auto``); ``say`` hears a line per trained head. Returns
    the markdown table and the path of ``heads.md`` it was written to."""
    out = Path(out)
    with open_study(out, {"study": "segment heads"}, overwrite):
        rows = compare_heads(
            heads or list(HEADS),
            patches or list(PATCHES),
            dataset=dataset or "shapes",
            data_dir=data_dir,
            epochs=EPOCHS if epochs is None else epochs,
            time_limit_s=None if minutes is None else minutes * 60,
            device="cpu" if device in (None, "auto") else device,
            progress=None if say is None else (lambda row: say(head_line(row))),
        )
        table = heads_table(rows)
        return table, write_file(out / "heads.md", table + "\n")
