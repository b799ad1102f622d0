"""The textbook's study (the Keras page of the seed texts): its protocol as a preset, its published
table, and its claims with a verdict each, decided by the seed-to-seed spread.

The page trained a 70,922-parameter ViT and a 60,554-parameter plain convnet on Fashion-MNIST,
1,000 and 4,000 training rows, 15 epochs, Adam 1e-3, batch 64, pixels in [0, 1], one seed, and
claimed: the ViT leads at 1,000 rows and at 4,000; its train−val gap is the larger; and the timing
inverts (the ViT slower at 1,000 rows, faster at 4,000).

A claim is tested on paired runs: each seed trains the ViT and the CNN on the same split and batch
order, so the per-seed difference ViT − CNN (for seconds, log(ViT / CNN)) is the measurement; with
``n`` seeds, mean ``d`` and standard error ``se = stdev / sqrt(n)``, a part of a claim expecting the
sign ``s`` is **reproduced** when ``s d > 2 se``, **not reproduced** when ``s d < -2 se`` and
**inconclusive** otherwise (and always with one seed). A claim of several parts is reproduced when
every part is, not reproduced when any part is, else inconclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..reporting import judge

if TYPE_CHECKING:
    from .compare import Cell, RunRecord

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


@dataclass
class Part:
    """One part of a claim as measured: the page's difference (``published``, from its table), the
    mean per-seed difference ``mean`` over ``seeds``, ``band`` = 2 standard errors (``None`` with one
    seed), and the ``verdict``. For ``seconds`` the differences are log ratios."""

    rows: int
    sign: int
    published: float
    mean: float
    band: float | None
    seeds: int
    verdict: str


@dataclass
class Verdict:
    """A claim tested in one setting of the study's other axes (``setting``: e.g. ``{"cnn":
    "textbook", "patch": 7, "augment": "none"}``; its ``cnn`` says which CNN the ViT meets)."""

    claim: Claim
    setting: dict[str, Any]
    parts: list[Part]

    @property
    def verdict(self) -> str:
        found = {part.verdict for part in self.parts}
        return (
            "not reproduced"
            if "not reproduced" in found
            else "reproduced"
            if found == {"reproduced"}
            else "inconclusive"
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


def claim_verdicts(cells: Sequence[Cell], records: dict[str, RunRecord]) -> list[Verdict]:
    """Each claim of :data:`CLAIMS` in each setting of the cells' axes other than seed and rows (the
    CNN met, patch, ...), from the seed-paired runs; a claim at rows the study did not train is
    left out."""
    pairs: dict[tuple[tuple[tuple[str, Any], ...], Any], list[tuple[RunRecord, RunRecord]]] = {}
    for cell in cells:
        setting = tuple((k, v) for k, v in cell.axes.items() if k not in ("seed", "rows"))
        pairs.setdefault((setting, cell.axes["rows"]), []).append((records[cell.vit], records[cell.cnn]))
    out = []
    for setting in dict.fromkeys(s for s, _ in pairs):
        for claim in CLAIMS:
            if any((setting, rows) not in pairs for rows, _ in claim.parts):
                continue
            parts = []
            for rows, sign in claim.parts:
                found = [
                    difference(claim.metric, getattr(v, claim.metric), getattr(c, claim.metric))
                    for v, c in pairs[setting, rows]
                ]
                mean, band, verdict = judge(found, sign)
                parts.append(
                    Part(rows, sign, published_difference(claim.metric, rows), mean, band, len(found), verdict)
                )
            out.append(Verdict(claim, dict(setting), parts))
    return out
