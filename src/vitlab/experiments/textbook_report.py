"""The textbook's claims tested on a study's runs, and the report's section on them.

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
from typing import Any

from ..reporting import judge, markdown_table
from .aggregates import Aggregate, known
from .axes import CNN_WORDS, join_words, phrase_axes
from .records import Cell, CompareResult, RunRecord
from .scoring import TRAIN_EVAL_ROWS
from .sections import execution_words, normalization_words
from .tables import format_mean_std, rows_text, signed
from .textbook import CLAIMS, PUBLISHED, TEXTBOOK_CNN, Claim, difference, published_difference


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


def _published_key(a: Aggregate) -> tuple[str, Any] | None:
    model = "vit" if a.kind == "vit" else "convnet" if a.axes.get("cnn") == "textbook" else None
    key = (model, a.axes.get("rows"))
    return key if key in PUBLISHED else None


def textbook_table(aggregates: Sequence[Aggregate]) -> list[str]:
    """Markdown lines: the textbook's columns, its published number beside vitlab's mean ± std for
    each (``–`` where the page has no such model), and vitlab's test accuracy."""
    header = [
        "Model",
        "Rows",
        "Parameters (textbook)",
        "Parameters (vitlab)",
        "Best val accuracy (textbook)",
        "Best val accuracy (vitlab)",
        "Final train accuracy (textbook)",
        "Final train accuracy (vitlab)",
        "Seconds (textbook)",
        "Seconds (vitlab)",
        "Test accuracy (vitlab)",
    ]
    body = []
    for a in aggregates:
        page = PUBLISHED.get(_published_key(a) or ("", 0), {})
        m, s = a.mean, a.std

        def published(metric: str, digits: int = 4, page: dict[str, float] = page) -> str:
            return (
                "–"
                if metric not in page
                else f"{page[metric]:,.0f}"
                if metric == "params"
                else f"{page[metric]:.{digits}f}"
            )

        body.append(
            [
                a.label.split(" patch")[0],
                rows_text(a.axes, a.train_rows),
                published("params"),
                f"{m['params']:,.0f}",
                published("best_val_acc"),
                format_mean_std(m["best_val_acc"], s["best_val_acc"]),
                published("final_train_acc"),
                format_mean_std(m["final_train_acc"], s["final_train_acc"]),
                published("seconds", 1),
                format_mean_std(m["seconds"], s["seconds"], 1),
                format_mean_std(m["test_acc"], s["test_acc"]),
            ]
        )
    return markdown_table(header, body)


def _difference(metric: str, value: float, band: float | None = None) -> str:
    """A ViT-minus-CNN difference: ``+0.0370 ± 0.0120`` (band: 2 standard errors), or for seconds the
    ratio ``x1.45 (x1.30–x1.62)``."""
    if metric == "seconds":
        text = f"×{math.exp(value):.2f}"
        return text if band is None else f"{text} (×{math.exp(value - band):.2f}–×{math.exp(value + band):.2f})"
    return signed(value, 4) + ("" if band is None else f" ± {band:.4f}")


def verdict_table(verdicts: Sequence[Verdict]) -> list[str]:
    """Markdown lines: per claim and CNN met, the page's difference, vitlab's mean per-seed difference
    ± 2 standard errors, and the verdict."""
    header = [
        "Claim",
        "ViT against",
        "Textbook (one run)",
        "vitlab (mean ± 2 SE of seed-paired differences)",
        "Verdict",
    ]
    varying = {
        k for v in verdicts for k in v.setting if k == "cnn" or len({repr(w.setting.get(k)) for w in verdicts}) > 1
    }
    body = []
    for v in verdicts:
        metric = v.claim.metric
        textbook = "; ".join(f"{p.rows:,} rows: {_difference(metric, p.published)}" for p in v.parts)
        measured = "; ".join(
            f"{p.rows:,} rows: {_difference(metric, p.mean, p.band)}, {p.seeds} seed"
            f"{'s' if p.seeds > 1 else ''} ({p.verdict})"
            for p in v.parts
        )
        against = (
            join_words(phrase_axes({k: x for k, x in v.setting.items() if k in varying}))
            or f"the {CNN_WORDS['matched']} CNN"
        )
        body.append([v.claim.text[0].upper() + v.claim.text[1:], against, textbook, measured, f"**{v.verdict}**"])
    return markdown_table(header, body)


def textbook_lines(result: CompareResult, aggregates: Sequence[Aggregate], verdicts: Sequence[Verdict]) -> list[str]:
    """The report's section on the textbook's study: its table beside vitlab's, and the verdicts."""
    cfg = result.config
    convnet = [a for a in aggregates if a.axes.get("cnn") == "textbook"]
    stand_in = (
        f"The page's convnet (60,554 parameters: convolutions of 32, 64 and 64 channels, global average "
        f"pooling, a 64-unit dense layer, the classifier) is built exactly: `{TEXTBOOK_CNN[0]}` with widths "
        f"{'-'.join(map(str, TEXTBOOK_CNN[1]['widths']))}, no BatchNorm and a {TEXTBOOK_CNN[1].get('hidden', 0)}-unit "
        f"hidden layer" + (f" ({convnet[0].mean['params']:,.0f} parameters here)" if convnet else "") + "; "
    )
    return [
        "## The textbook's study",
        "",
        f"The textbook's page trained a Keras ViT and a plain convnet on Fashion-MNIST, 1,000 and 4,000 rows, 15 "
        f"epochs, Adam 1e-3, batch 64, one seed. Its published numbers stand in the *textbook* columns; vitlab's are "
        f"the mean ± standard deviation over {cfg.seeds} seed{'s' if cfg.seeds > 1 else ''} of this study "
        f"(`{cfg.vit}`, recipe `{cfg.recipe}`, {cfg.epochs} epoch{'s' if cfg.epochs > 1 else ''}, "
        f"{normalization_words(cfg.normalization)}). "
        + stand_in
        + "the size-matched CNN is vitlab's BatchNorm CNN sized to the ViT's parameter count. "
        "The page's seconds are one Keras run on its own machine, vitlab's come from this one "
        f"({execution_words(result.execution)}): compare the ratios, not the seconds.",
        "",
        *textbook_table(aggregates),
        "",
        *verdict_table(verdicts),
        "",
        "Each seed trains the ViT and the CNN on the same split and batch order, so a claim is tested on the "
        "per-seed differences ViT − CNN (for seconds, the ratio ViT / CNN, averaged as logarithms): *reproduced* "
        "when their mean lies beyond two standard errors in the claimed direction, *not reproduced* when beyond "
        "them the other way, *inconclusive* in between or with one seed; a claim of two parts is reproduced when "
        "both are and not reproduced when either is not. The page quotes the ViT's gap as +0.1545 against "
        "+0.0040; its own table gives +0.1690 and +0.0270 at 1,000 rows and +0.1215 and +0.0040 at 4,000, which "
        "the textbook column uses.",
        "",
        *train_reading_lines(aggregates),
    ]


def train_reading_lines(aggregates: Sequence[Aggregate]) -> list[str]:
    """Both readings of training accuracy per model and rows, with what each is (empty when the eval-mode
    reading was not taken)."""
    pairs = [a for a in aggregates if a.mean.get("train_eval_acc") is not None]
    if not pairs:
        return []
    body = [
        [
            a.label.split(" patch")[0],
            rows_text(a.axes, a.train_rows),
            format_mean_std(a.mean["final_train_acc"], a.std["final_train_acc"]),
            format_mean_std(a.mean["train_eval_acc"], a.std["train_eval_acc"]),
            format_mean_std(a.mean["best_val_acc"], a.std["best_val_acc"]),
        ]
        for a in pairs
    ]
    return [
        "**Two readings of training accuracy.** *Running mean* (the tables' final train accuracy) averages the "
        "last epoch's batches as they are trained on: training mode (dropout, BatchNorm's batch statistics and "
        "augmentation on) while the weights still change from batch to batch. That is what Keras's `fit` "
        "reports as `accuracy`, so the page's column and vitlab's are the same reading. *Eval mode* scores the "
        "weights vitlab keeps (those of the best validation epoch) on the training rows afterwards, in eval "
        f"mode, without augmentation (at most {TRAIN_EVAL_ROWS:,} of them). Here the two readings differ by at "
        f"most {max(abs(known(a.mean, 'final_train_acc') - known(a.mean, 'train_eval_acc')) for a in pairs):.4f} "
        "(means over seeds), so a page figure far from vitlab's is not a matter of reading; `benchmarks/RESULTS.md` "
        "trains the page's Keras model beside vit-seed to find what it is.",
        "",
        *markdown_table(
            [
                "Model",
                "Rows",
                "Train accuracy, running mean (training mode)",
                "Train accuracy, eval mode",
                "Best val accuracy",
            ],
            body,
        ),
        "",
    ]
