"""The textbook's study (the Keras page of the seed texts): its protocol as a preset, its convnet,
its published table and its claims. :mod:`~vitlab.experiments.textbook_report` tests the claims on a
study's runs and writes the report's section.

The page trained a 70,922-parameter ViT and a 60,554-parameter plain convnet on Fashion-MNIST,
1,000 and 4,000 training rows, 15 epochs, Adam 1e-3, batch 64, pixels in [0, 1], one seed, and
claimed: the ViT leads at 1,000 rows and at 4,000; its train−val gap is the larger; and the timing
inverts (the ViT slower at 1,000 rows, faster at 4,000).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# The page's convnet: 3x3 conv + ReLU stages of 32, 64 and 64 channels (max-pool between), no
# BatchNorm, global average pool, a 64-unit dense layer with ReLU, linear head; 60,554 parameters on
# 28x28x1, 10 classes, as the page states.
TEXTBOOK_CNN: tuple[str, dict[str, Any]] = ("cnn-seed", {"widths": [32, 64, 64], "norm": "none", "hidden": 64})

# CompareConfig fields of ``--preset textbook``.
PRESET: dict[str, Any] = {
    "dataset": "fashion-mnist",
    "rows": [1000, 4000],
    "patches": [7],
    "augment": ["none"],
    "seeds": 5,
    "epochs": 15,
    "recipe": "plain",
    "vit": "vit-seed",
    "cnn": "cnn-seed",
    "cnns": ["textbook", "matched"],
    "normalization": "unit",
    "train_eval": True,
}

# The page's table: (model, rows) -> its columns. "convnet" is its 60,554-parameter CNN.
PUBLISHED: dict[tuple[str, int], dict[str, float]] = {
    ("vit", 1000): {"params": 70_922, "best_val_acc": 0.7160, "final_train_acc": 0.8850, "seconds": 62.0},
    ("convnet", 1000): {"params": 60_554, "best_val_acc": 0.6790, "final_train_acc": 0.7060, "seconds": 42.8},
    ("vit", 4000): {"params": 70_922, "best_val_acc": 0.7970, "final_train_acc": 0.9185, "seconds": 56.6},
    ("convnet", 4000): {"params": 60_554, "best_val_acc": 0.7620, "final_train_acc": 0.7660, "seconds": 94.3},
}

VERDICTS = ("reproduced", "not reproduced", "inconclusive")


@dataclass(frozen=True)
class Claim:
    """A claim of the page: at each ``(rows, sign)`` of ``parts``, the ViT-minus-CNN difference in
    ``metric`` (``best_val_acc``, ``gap``, or ``seconds`` as a log ratio) has that sign."""

    text: str
    metric: str
    parts: tuple[tuple[int, int], ...]


CLAIMS = (
    Claim("the ViT leads at 1,000 rows", "best_val_acc", ((1000, 1),)),
    Claim("the ViT leads at 4,000 rows", "best_val_acc", ((4000, 1),)),
    Claim("the ViT's train−val gap is the larger", "gap", ((1000, 1), (4000, 1))),
    Claim("timing inversion: the ViT is slower at 1,000 rows and faster at 4,000", "seconds", ((1000, 1), (4000, -1))),
)


def difference(metric: str, vit: float, cnn: float) -> float:
    """ViT − CNN, or log(ViT / CNN) for ``seconds``."""
    return math.log(vit / cnn) if metric == "seconds" else vit - cnn


def published_difference(metric: str, rows: int) -> float:
    """The page's ViT-minus-convnet difference at ``rows`` (gap = final train − best val)."""
    vit, cnn = PUBLISHED["vit", rows], PUBLISHED["convnet", rows]
    if metric == "gap":
        return (vit["final_train_acc"] - vit["best_val_acc"]) - (cnn["final_train_acc"] - cnn["best_val_acc"])
    return difference(metric, vit[metric], cnn[metric])
