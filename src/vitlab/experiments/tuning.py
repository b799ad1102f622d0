"""The report's section on the ViT's training modes (the ``tune`` axis): what each mode scores at each
training-set size, what it costs (trainable parameters, optimiser state, seconds per step), and whether it
beats full fine-tuning -- the verdict of seed-paired differences (:func:`vitlab.reporting.judge`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from ..reporting import judge, markdown_table
from .axes import variant_words
from .records import CompareResult, RunRecord

BASE = "full"


def score(record: RunRecord) -> float:
    """What the section compares: the test accuracy of the checkpoint chosen by validation (the best
    validation accuracy without a test split)."""
    return record.test_acc if record.test_acc is not None else record.best_val_acc


def _cell(record: RunRecord) -> tuple:
    """Every axis but the mode and the seed: the runs a mode is paired with."""
    return tuple(sorted((k, repr(v)) for k, v in record.axes.items() if k not in ("tune", "seed")))


def _rows_words(records: Sequence[RunRecord]) -> str:
    return f"{records[0].train_rows:,} rows"


def _mean_std(values: Sequence[float]) -> str:
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.4f} ± {spread:.4f}"


def _cost(records: Sequence[RunRecord], key: str) -> float | None:
    values = [r.cost[key] for r in records if r.cost and key in r.cost]
    return statistics.fmean(values) if values else None


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 2**20:,.2f} MiB" if value >= 2**20 else f"{value / 2**10:,.1f} KiB"


def tune_table(groups: dict[tuple, dict[str, list[RunRecord]]]) -> list[str]:
    """One row per cell and mode: accuracy (mean ± std over seeds), trainable / total parameters, optimiser
    state, seconds per step, training seconds."""
    body = []
    for by_mode in groups.values():
        for mode, records in by_mode.items():
            trainable, total = _cost(records, "trainable_params"), _cost(records, "total_params")
            step = _cost(records, "step_seconds")
            body.append(
                [
                    _rows_words(records),
                    mode,
                    _mean_std([score(r) for r in records]),
                    "-" if trainable is None or total is None else f"{trainable:,.0f} / {total:,.0f}",
                    _bytes(_cost(records, "optimizer_state_bytes")),
                    "-" if step is None else f"{step * 1000:.1f}",
                    f"{statistics.fmean(r.seconds for r in records):.1f}",
                ]
            )
    header = ["Cell", "Mode", "Accuracy", "Trainable / total params", "Optimiser state", "ms / step", "Seconds"]
    return markdown_table(header, body)


def tune_verdicts(groups: dict[tuple, dict[str, list[RunRecord]]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Per cell and mode other than ``full``: the seed-paired differences (mode − full) and whether the mode
    beats full fine-tuning (``reproduced``: by more than two standard errors; ``not reproduced``: full
    fine-tuning wins by as much; else ``inconclusive``). Markdown lines and the verdicts as records."""
    body, found = [], []
    for by_mode in groups.values():
        base = {r.axes.get("seed"): r for r in by_mode.get(BASE, [])}
        for mode, records in by_mode.items():
            paired = [(score(r), score(base[r.axes.get("seed")])) for r in records if r.axes.get("seed") in base]
            if mode == BASE or not paired:
                continue
            mean, band, verdict = judge([a - b for a, b in paired], +1)
            words = (
                "beats full fine-tuning"
                if verdict == "reproduced"
                else ("loses to full fine-tuning" if verdict == "not reproduced" else "inconclusive")
            )
            spread = "no band (one seed)" if band is None else f"± {band:.4f}"
            body.append([_rows_words(records), mode, f"{mean:+.4f} {spread}", str(len(paired)), f"**{words}**"])
            found.append(
                {"rows": records[0].train_rows, "mode": mode, "difference": mean, "band": band, "verdict": words}
            )
    header = ["Cell", "Mode", "Mode − full (mean ± 2 SE, seed-paired)", "Seeds", "Verdict"]
    return (markdown_table(header, body) if body else []), found


def tune_groups(result: CompareResult) -> dict[tuple, dict[str, list[RunRecord]]]:
    """The ViT runs by cell (every axis but mode and seed, in plan order), then by mode (in axis order)."""
    modes = next((axis.values for axis in result.plan.axes if axis.name == "tune"), ())
    groups: dict[tuple, dict[str, list[RunRecord]]] = {}
    for record in result.records.values():
        if record.kind == "vit" and not record.diverged and "tune" in record.axes:
            by_mode = groups.setdefault(_cell(record), {m: [] for m in modes})
            by_mode[record.axes["tune"]].append(record)
    return {k: {m: rs for m, rs in v.items() if rs} for k, v in groups.items()}


def tune_lines(result: CompareResult) -> list[str]:
    """The report's section on the training modes (empty when the study does not vary them)."""
    groups = tune_groups(result)
    if not groups:
        return []
    cfg = result.config
    start = f"`{cfg.init}`" if cfg.init is not None else "the ViT pretrained by the `pretrain` axis"
    modes = next(axis.values for axis in result.plan.axes if axis.name == "tune")
    verdicts, _ = tune_verdicts(groups)
    return [
        "## Training modes",
        "",
        f"Each mode ({', '.join(variant_words('tune', m) for m in modes)}) starts from {start} and trains on "
        f"the cell's rows with layer-wise decay {cfg.layer_decay:g}; `head` freezes the vision encoder (patch "
        "embedding + transformer + final norm) and trains the head. Accuracy is the test accuracy of the "
        "checkpoint chosen by validation (validation accuracy without a test split), mean ± std over seeds; "
        "the costs are each run's own (optimiser state: the tensors AdamW keeps per trainable weight).",
        "",
        *tune_table(groups),
        "",
        *verdicts,
        "",
    ]


__all__ = ["score", "tune_groups", "tune_lines", "tune_table", "tune_verdicts"]
