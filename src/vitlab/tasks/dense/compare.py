"""Segmentation heads side by side, by patch size: ``compare_heads(...) -> list of rows``.

The textbook's prediction: a per-patch linear head can only paint whole patches (softened by
bilinear upsampling), so it loses detail at object boundaries, more so for larger patches; a decoder
with skip connections recovers it. Each row reports mean IoU, pixel accuracy and the accuracy on the
boundary band (pixels next to a class change).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...data.shapes import SHAPES_COUNT, load_dense_dataset
from .train import DenseTrainConfig, train_dense


def compare_heads(
    heads: Sequence[str] = ("linear", "decoder"),
    patches: Sequence[int] = (4, 8, 16),
    *,
    dataset: str = "shapes",
    data_dir: str | None = None,
    count: int = SHAPES_COUNT,
    image_size: int = 64,
    epochs: int = 30,
    seed: int = 0,
    device: str = "auto",
    time_limit_s: float | None = None,
    model: dict[str, Any] | None = None,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Train every (patch, head) pair on the same split and seed; rows of ``head``, ``patch``,
    ``mean_iou``, ``pixel_acc``, ``boundary_acc`` (test split), ``params``, ``seconds``. Every
    setting is checked (as a :class:`DenseTrainConfig`) before the data is made."""
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
        r = train_dense(cfg, splits)
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
