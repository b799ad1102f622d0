"""A comparison's numbers and words: aggregates over seeds, who leads each cell, conclusion
sentences generated from those numbers, and the files (``results.json``, ``report.md``, figures).

Definitions used throughout:

- **gap** = final training accuracy - best validation accuracy (see :class:`~.compare.RunRecord`).
- **lead** of a cell = mean over seeds of (ViT best val acc - CNN best val acc), the two models of
  each seed trained on the same split; positive means the ViT is ahead.
- **spread** = the sample standard deviation (n - 1) of those per-seed differences; unknown with one
  seed. A lead is "larger than the spread" when ``|lead| > spread``, else "within the spread".
- **robustness** (with ``CompareConfig.robustness``): accuracy with a share of the patches masked and
  with centre crops (see :mod:`~vitlab.explain.robustness`), averaged over seeds like the rest.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from .. import __version__
from ..analysis.cost import cost_table
from ..data import AugmentConfig
from ..models import ViTConfig, get_config
from ..reporting import markdown_table
from ..runs.layout import REPORT, RESULTS
from .figures import (
    CNN_WORDS,
    VARIANTS,
    augment_words,
    plot_accuracy_vs_rows,
    plot_gap,
    plot_learning_curves,
    variant_words,
)
from .files import write_file
from .textbook import PUBLISHED, TEXTBOOK_CNN, Verdict, claim_verdicts
from .training import TrainConfig

if TYPE_CHECKING:
    from .compare import CompareResult, RunRecord

# Per-run metrics (fields of RunRecord), in the order the tables show them.
METRICS = (
    "params",
    "best_val_acc",
    "final_val_acc",
    "final_train_acc",
    "gap",
    "val_ece",
    "test_acc",
    "seconds",
    "images_per_s",
    "peak_mb",
    "agreement",
    "train_eval_acc",
    "permuted_agreement",
    "unpositioned_agreement",
)

# Training rows the eval-mode reading of training accuracy scores (the first ones).
TRAIN_EVAL_ROWS = 10_000

FIGURES = {"accuracy_vs_rows": "accuracy_vs_rows.png", "learning_curves": "learning_curves.png", "gap": "gap.png"}


@dataclass
class Aggregate:
    """One model in one cell, over its seeds: ``mean`` / ``std`` per metric of :data:`METRICS`
    (``std`` is ``None`` with one seed, a metric's entries ``None`` where the runs have no value),
    the mean learning curves, and per patch grid its robustness (``{"patch", "mean", "std"}``, empty
    when not measured)."""

    kind: str
    label: str
    axes: dict[str, Any]
    train_rows: int
    seeds: int
    mean: dict[str, float | None]
    std: dict[str, float | None]
    curves: dict[str, list[float]]
    robustness: list[dict[str, Any]] = field(default_factory=list)

    def known_mean(self, metric: str) -> float:
        """``mean[metric]`` for a metric every run records (accuracies, gap, ECE)."""
        return known(self.mean, metric)


@dataclass
class Lead:
    """A cell's ViT against its CNN: their aggregates' means, the lead in best validation accuracy,
    its seed-to-seed ``spread`` (``None`` with one seed) and the number of ``seeds``."""

    axes: dict[str, Any]
    train_rows: int
    vit_label: str
    cnn_label: str
    vit: dict[str, float | None]
    cnn: dict[str, float | None]
    lead: float
    spread: float | None
    seeds: int

    @property
    def leader(self) -> str:
        """``"ViT"``, ``"CNN"`` or ``"tie"``."""
        return "ViT" if self.lead > 0 else "CNN" if self.lead < 0 else "tie"

    @property
    def verdict(self) -> str:
        """``"larger than the spread"``, ``"within the spread"`` or ``"spread unknown"``."""
        if self.spread is None:
            return "spread unknown"
        return "larger than the spread" if abs(self.lead) > self.spread else "within the spread"


def known(means: Mapping[str, float | None], metric: str) -> float:
    """``means[metric]`` for a metric every run records (accuracies, gap, ECE), where a None is a bug."""
    value = means[metric]
    if value is None:
        raise ValueError(f"no mean {metric!r}: every run records it, so its records are malformed")
    return value


def _spread(values: Sequence[float]) -> float | None:
    return statistics.stdev(values) if len(values) > 1 else None


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    present = [v for v in values if v is not None]
    if len(present) < len(values):
        return None, None
    return statistics.fmean(present), _spread(present)


def _without_seed(axes: dict[str, Any]) -> tuple:
    return tuple((k, v) for k, v in axes.items() if k != "seed")


def aggregate(records: Sequence[RunRecord]) -> list[Aggregate]:
    """Group runs by model and cell (every axis but the seed) and average each metric over seeds;
    ordered by setting of the shared axes (first seen first), ViTs before the CNN within each."""
    groups: dict[tuple, list[RunRecord]] = {}
    for record in records:
        groups.setdefault((record.label, _without_seed(record.axes)), []).append(record)
    out = []
    for (label, axes), runs in groups.items():
        stats = {metric: _mean_std([getattr(r, metric) for r in runs]) for metric in METRICS}
        epochs = min(len(r.curves["val_acc"]) for r in runs)
        curves = {
            name: [statistics.fmean(r.curves[name][e] for r in runs) for e in range(epochs)] for name in runs[0].curves
        }
        out.append(
            Aggregate(
                runs[0].kind,
                label,
                dict(axes),
                runs[0].train_rows,
                len(runs),
                {m: s[0] for m, s in stats.items()},
                {m: s[1] for m, s in stats.items()},
                curves,
                _robustness_over_seeds(runs),
            )
        )
    shared = {k for a in out if a.kind == "cnn" for k in a.axes}
    settings: dict[tuple, int] = {}
    for a in out:
        settings.setdefault(tuple(v for k, v in a.axes.items() if k in shared), len(settings))
    return sorted(out, key=lambda a: (settings[tuple(v for k, v in a.axes.items() if k in shared)], a.kind != "vit"))


def _robustness_over_seeds(runs: Sequence[RunRecord]) -> list[dict[str, Any]]:
    """Per patch grid, the mean and std over ``runs`` (one model's seeds) of each robustness accuracy."""
    if any(r.robustness is None for r in runs):
        return []
    out = []
    for i, entry in enumerate(cast(list, runs[0].robustness)):
        stats = {k: _mean_std([cast(list, r.robustness)[i][k] for r in runs]) for k in entry if k != "patch"}
        out.append(
            {
                "patch": entry["patch"],
                "mean": {k: v[0] for k, v in stats.items()},
                "std": {k: v[1] for k, v in stats.items()},
            }
        )
    return out


def compute_leads(result: CompareResult) -> list[Lead]:
    """One :class:`Lead` per cell (seeds pooled), in grid order."""
    by_cell: dict[tuple, list[tuple[RunRecord, RunRecord]]] = {}
    for cell in result.plan.cells:
        pair = (result.records[cell.vit], result.records[cell.cnn])
        by_cell.setdefault(_without_seed(cell.axes), []).append(pair)
    aggregates = {(a.label, _without_seed(a.axes)): a for a in aggregate(list(result.records.values()))}
    leads = []
    for axes, pairs in by_cell.items():
        vit_run, cnn_run = pairs[0]
        vit = aggregates[vit_run.label, _without_seed(vit_run.axes)]
        cnn = aggregates[cnn_run.label, _without_seed(cnn_run.axes)]
        diffs = [v.best_val_acc - c.best_val_acc for v, c in pairs]
        leads.append(
            Lead(
                dict(axes),
                vit_run.train_rows,
                vit.label,
                cnn.label,
                vit.mean,
                cnn.mean,
                statistics.fmean(diffs),
                _spread(diffs),
                len(pairs),
            )
        )
    return leads


# -- conclusions ----------------------------------------------------------------------------------


def _join(parts: Sequence[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def _signed(value: float, digits: int = 3) -> str:
    return f"{value:+.{digits}f}".replace("-", "−")


def _phrase_axes(axes: dict[str, Any]) -> list[str]:
    """Each axis but rows and seed in words, patch first: ``patch 2``, ``no augmentation``,
    ``window attention``."""
    parts = []
    for name, value in sorted(axes.items(), key=lambda item: item[0] != "patch"):
        if name in ("rows", "seed"):
            continue
        if name == "patch":
            parts.append(f"patch {value}")
        elif name == "augment":
            parts.append(augment_words(value))
        elif name in VARIANTS:
            parts.append(variant_words(name, value))
        elif name == "cnn":
            parts.append(f"the {CNN_WORDS[value]} CNN")
        else:
            parts.append(f"{name} {value}")
    return parts


def describe_cell(axes: dict[str, Any], train_rows: int) -> str:
    """``At 300 rows with patch 2 and no augmentation``: a cell in words (seed ignored)."""
    parts = _phrase_axes(axes)
    rows = f"{train_rows:,} rows" + (" (the full pool)" if "rows" in axes and axes["rows"] is None else "")
    return f"At {rows}" + (f" with {_join(parts)}" if parts else "")


def lead_sentence(lead: Lead) -> str:
    """The cell's verdict, e.g. ``At 300 rows with patch 2 and no augmentation the ViT leads the
    CNN by 0.031 (spread 0.012 across 3 seeds): larger than the spread.``"""
    where = describe_cell(lead.axes, lead.train_rows)
    if lead.leader == "tie":
        what = f"the ViT and the CNN tie at {lead.vit['best_val_acc']:.3f} best validation accuracy"
    else:
        other = "CNN" if lead.leader == "ViT" else "ViT"
        what = f"the {lead.leader} leads the {other} by {abs(lead.lead):.3f}"
    if lead.spread is None:
        return f"{where} {what}, from one seed: the seed-to-seed spread is unknown."
    return f"{where} {what} (spread {lead.spread:.3f} across {lead.seeds} seeds): {lead.verdict}."


def _cell_key(axes: dict[str, Any], drop: str) -> tuple:
    return tuple((k, v) for k, v in axes.items() if k != drop)


def conclusions(leads: Sequence[Lead], tokens: dict[int, int] | None = None) -> list[str]:
    """Sentences that follow from the cells' numbers, nothing written in advance: one per cell,
    the tally, the trend with training rows, the train−val gaps, the effect of augmentation, the
    ViT's best patch size (with its token count from ``tokens``, patch -> tokens) and calibration."""
    if not leads:
        return []
    out = [lead_sentence(lead) for lead in leads]
    vit_ahead = sum(lead.leader == "ViT" for lead in leads)
    cnn_ahead = sum(lead.leader == "CNN" for lead in leads)
    tally = f"Over the {len(leads)} cells the ViT leads in {vit_ahead} and the CNN in {cnn_ahead}"
    ties = len(leads) - vit_ahead - cnn_ahead
    tally += f" ({ties} tied)" if ties else ""
    if all(lead.spread is None for lead in leads):
        tally += (
            "; with one seed per cell no lead can be told apart from seed-to-seed noise (run with --seeds 3 or more)."
        )
    else:
        clear = sum(lead.verdict == "larger than the spread" for lead in leads)
        tally += f"; the lead is larger than the seed-to-seed spread in {clear} of them."
    out.append(tally)
    out += _rows_trend(leads)
    out += _gap_sentences(leads)
    out += _augment_sentences(leads)
    out += _patch_sentences(leads, tokens or {})
    out += _variant_sentences(leads)
    calibrated = [lead for lead in leads if lead.vit["val_ece"] is not None and lead.cnn["val_ece"] is not None]
    if calibrated:  # a cell with a diverged run has no ECE
        vit_ece = statistics.fmean(known(lead.vit, "val_ece") for lead in calibrated)
        cnn_ece = statistics.fmean(known(lead.cnn, "val_ece") for lead in calibrated)
        better = "the ViT" if vit_ece < cnn_ece else "the CNN" if cnn_ece < vit_ece else "neither"
        out.append(
            f"Validation ECE at the best epoch averages {vit_ece:.3f} for the ViT and {cnn_ece:.3f} for the "
            f"CNN: {better} is the better calibrated."
        )
    return out


def _rows_trend(leads: Sequence[Lead]) -> list[str]:
    """How the lead moves from the fewest to the most training rows, per combination of the other axes."""
    series: dict[tuple, list[Lead]] = {}
    for lead in leads:
        series.setdefault(_cell_key(lead.axes, "rows"), []).append(lead)
    out = []
    for group in series.values():
        if len(group) < 2:
            continue
        small, large = min(group, key=lambda x: x.train_rows), max(group, key=lambda x: x.train_rows)
        change = large.lead - small.lead
        trend = (
            "more data moves it towards the ViT"
            if change > 0
            else "more data moves it towards the CNN"
            if change < 0
            else "it does not move with more data"
        )
        parts = _phrase_axes(small.axes)
        where = f"With {_join(parts)}, the" if parts else "The"
        out.append(
            f"{where} ViT's margin (ViT − CNN) goes from {_signed(small.lead)} at "
            f"{small.train_rows:,} rows to {_signed(large.lead)} at {large.train_rows:,}: {trend}."
        )
    return out


def _gap_sentences(leads: Sequence[Lead]) -> list[str]:
    vit_gap = statistics.fmean(known(lead.vit, "gap") for lead in leads)
    cnn_gap = statistics.fmean(known(lead.cnn, "gap") for lead in leads)
    larger = sum(known(lead.vit, "gap") > known(lead.cnn, "gap") for lead in leads)
    if max(vit_gap, cnn_gap) <= 0:
        who = "neither model overfits on average (training accuracy stays at or below validation accuracy)"
    elif vit_gap == cnn_gap:
        who = "on average they overfit alike"
    else:
        who = f"on average the {'ViT' if vit_gap > cnn_gap else 'CNN'} overfits more"
    return [
        f"The train−val gap averages {_signed(vit_gap)} for the ViT and {_signed(cnn_gap)} for the CNN "
        f"(the ViT's is the larger in {larger} of {len(leads)} cells): {who}."
    ]


def _augment_sentences(leads: Sequence[Lead]) -> list[str]:
    """Per preset other than "none": the mean change in best val accuracy it brings each model,
    over cells matched on every other axis."""
    base = {_cell_key(lead.axes, "augment"): lead for lead in leads if lead.axes.get("augment") == "none"}
    presets = sorted({lead.axes["augment"] for lead in leads if lead.axes.get("augment", "none") != "none"})
    out = []
    for preset in presets:
        matched = [
            (base[k], lead)
            for lead in leads
            if lead.axes["augment"] == preset and (k := _cell_key(lead.axes, "augment")) in base
        ]
        if not matched:
            continue
        d_vit = statistics.fmean(known(a.vit, "best_val_acc") - known(b.vit, "best_val_acc") for b, a in matched)
        d_cnn = statistics.fmean(known(a.cnn, "best_val_acc") - known(b.cnn, "best_val_acc") for b, a in matched)
        words = augment_words(preset)
        out.append(
            f"{words[0].upper() + words[1:]} changes best validation accuracy by {_signed(d_vit)} for "
            f"the ViT and {_signed(d_cnn)} for the CNN (mean over {len(matched)} matched cells)."
        )
    return out


def _patch_sentences(leads: Sequence[Lead], tokens: dict[int, int]) -> list[str]:
    by_patch: dict[int, list[float]] = {}
    for lead in leads:
        if "patch" in lead.axes:
            by_patch.setdefault(lead.axes["patch"], []).append(known(lead.vit, "best_val_acc"))
    if len(by_patch) < 2:
        return []
    means = {patch: statistics.fmean(values) for patch, values in by_patch.items()}
    best, worst = max(means, key=means.__getitem__), min(means, key=means.__getitem__)

    def named(patch: int) -> str:
        return f"patch {patch}" + (f" ({tokens[patch]} tokens)" if patch in tokens else "")

    if means[best] == means[worst]:
        return [f"The ViT's mean best validation accuracy is the same, {means[best]:.3f}, at every patch size."]
    return [
        f"The ViT does best with {named(best)}, mean best validation accuracy {means[best]:.3f}, and worst "
        f"with {named(worst)}, {means[worst]:.3f}."
    ]


def _variant_sentences(leads: Sequence[Lead]) -> list[str]:
    """Per variant axis studied, each value against the axis's default (or its first value): the mean
    change in the ViT's best validation accuracy, forward throughput and peak memory, over cells
    matched on every other axis; for ToMe, how many predictions merging keeps."""
    out = []
    for name, default in VARIANTS.items():
        values = list(dict.fromkeys(lead.axes[name] for lead in leads if name in lead.axes))
        if len(values) < 2:
            continue
        base_value = default if default in values else values[0]
        base = {_cell_key(lead.axes, name): lead for lead in leads if lead.axes[name] == base_value}
        for value in (v for v in values if v != base_value):
            matched = [
                (base[k], lead)
                for lead in leads
                if lead.axes[name] == value and (k := _cell_key(lead.axes, name)) in base
            ]
            if not matched:
                continue

            def mean(fn: Any, matched: list[tuple[Lead, Lead]] = matched) -> float:
                return statistics.fmean(fn(b.vit, v.vit) for b, v in matched)

            speed = mean(lambda b, v: v["images_per_s"] / b["images_per_s"])
            memory = mean(lambda b, v: v["peak_mb"] / b["peak_mb"])
            cost = (
                f"forward throughput x{speed:.2f} ({'faster' if speed > 1 else 'slower'}) and peak forward "
                f"memory x{memory:.2f}"
            )
            cells = f"mean over {len(matched)} matched cell{'s' if len(matched) > 1 else ''}"
            against = variant_words(name, base_value)
            if value == "tome":
                keep = mean(lambda b, v: v["agreement"])
                before, after = mean(lambda b, v: b["final_val_acc"]), mean(lambda b, v: v["final_val_acc"])
                out.append(
                    f"Token merging (ToMe, applied to the trained full-attention ViT without retraining) keeps "
                    f"{keep:.1%} of its validation predictions and moves validation accuracy at the final "
                    f"weights from {before:.3f} to {after:.3f}, with {cost} ({cells})."
                )
                continue
            change = mean(lambda b, v: v["best_val_acc"] - b["best_val_acc"])
            seconds = mean(lambda b, v: v["seconds"] / b["seconds"])
            words = (
                f"{value.upper()} pretraining"
                if name == "pretrain"
                else "distillation from the CNN"
                if name == "distill"
                else variant_words(name, value)
            )
            out.append(
                f"{words[0].upper() + words[1:]} changes the ViT's best validation accuracy by "
                f"{_signed(change)} "
                f"against {against} ({cells}), with training wall time x{seconds:.2f}"
                + (" (pretraining included)" if name == "pretrain" else "")
                + f", {cost}."
            )
    return out


# -- files ----------------------------------------------------------------------------------------


def padded(side: int, patch: int) -> int:
    """``side`` rounded up to a multiple of ``patch``: the side a padding ViT sees."""
    return -(-side // patch) * patch


def token_costs(result: CompareResult) -> list[dict[str, Any]]:
    """The cost model's row per patch size for the study's ViT and image (square images only; a
    padded patch is priced on the padded image), with the ViT's parameter count at that patch (that
    of its runs without variants, ``None`` when the study has none). The cost model prices a plain ViT's
    global attention: a Swin (windows in stages) gets no table."""
    chans, height, width = result.data["image_shape"]
    vit = get_config(result.config.vit_name)
    if height != width or not isinstance(vit, ViTConfig):
        return []
    sizes = tuple((padded(height, p), p) for p in result.config.patch_sizes)
    rows = cost_table(
        sizes,
        dim=vit.embed_dim,
        depth=vit.depth,
        heads=vit.num_heads,
        mlp_ratio=vit.mlp_ratio,
        class_token=vit.class_token,
        in_chans=chans,
    )
    plain = [
        r
        for r in result.records.values()
        if r.kind == "vit" and all(r.axes.get(k, v) == v for k, v in VARIANTS.items())
    ]
    params = {r.axes["patch"]: r.params for r in plain}
    return [{**row.to_dict(), "params": params.get(row.patch)} for row in rows]


def _fmt(mean: float | None, std: float | None, digits: int = 4) -> str:
    if mean is None:
        return "–"
    text = f"{mean:.{digits}f}"
    return text if std is None else f"{text} ± {std:.{digits}f}"


def _rows_text(axes: dict[str, Any], train_rows: int) -> str:
    return f"{train_rows:,}" + (" (full)" if axes.get("rows", 0) is None else "")


def results_table(aggregates: Sequence[Aggregate]) -> list[str]:
    """Markdown lines: the textbook's columns (Model, Rows, Parameters, Best val accuracy, Final
    train accuracy, Seconds), then Patch, Augment, the variant axes studied, Gap, ECE, Test accuracy,
    forward Images/s and Peak MB (and ToMe's Agreement when studied); mean ± std over seeds."""
    extra = _variant_columns(aggregates)
    agreement = any(a.mean["agreement"] is not None for a in aggregates)
    header = [
        "Model",
        "Rows",
        "Parameters",
        "Best val accuracy",
        "Final train accuracy",
        "Seconds",
        "Patch",
        "Augment",
        *(k.capitalize() for k in extra),
        "Gap",
        "ECE",
        "Test accuracy",
        "Images/s",
        "Peak MB",
        *(["Agreement"] if agreement else []),
    ]
    body = []
    for a in aggregates:
        m, s = a.mean, a.std
        body.append(
            [
                a.label.split(" patch")[0],
                _rows_text(a.axes, a.train_rows),
                f"{m['params']:,.0f}",
                _fmt(m["best_val_acc"], s["best_val_acc"]),
                _fmt(m["final_train_acc"], s["final_train_acc"]),
                _fmt(m["seconds"], s["seconds"], 1),
                str(a.axes.get("patch", "–")),
                str(a.axes.get("augment", "–")),
                *(str(a.axes.get(k, "–")) for k in extra),
                _fmt(m["gap"], s["gap"]),
                _fmt(m["val_ece"], s["val_ece"]),
                _fmt(m["test_acc"], s["test_acc"]),
                _fmt(m["images_per_s"], s["images_per_s"], 0),
                _fmt(m["peak_mb"], s["peak_mb"], 1),
                *([_fmt(m["agreement"], s["agreement"])] if agreement else []),
            ]
        )
    return markdown_table(header, body)


def _variant_columns(aggregates: Sequence[Aggregate]) -> list[str]:
    """The axes the tables show after Patch and Augment: the variant axes studied, then any other."""
    others = sorted({k for a in aggregates for k in a.axes} - {"rows", "patch", "augment", "cnn", *VARIANTS})
    return [k for k in (*VARIANTS, *others) if any(k in a.axes for a in aggregates)]


def robustness_table(aggregates: Sequence[Aggregate]) -> list[str]:
    """Markdown lines: per model and patch grid (a CNN's grid is that of a ViT it meets), its clean,
    masked (tokens dropped, pixels zeroed) and cropped accuracy, mean ± std over seeds (``–`` where a
    model cannot drop tokens); ``[]`` when not measured."""
    measured = [a for a in aggregates if a.robustness]
    if not measured:
        return []
    scores = [k for k in measured[0].robustness[0]["mean"] if k != "clean"]
    extra = _variant_columns(measured)
    header = [
        "Model",
        "Rows",
        "Patch grid",
        "Augment",
        *(k.capitalize() for k in extra),
        "Clean",
        *(_probe_words(k) for k in scores),
    ]
    body = [
        [
            a.label.split(" patch")[0],
            _rows_text(a.axes, a.train_rows),
            str(entry["patch"]),
            str(a.axes.get("augment", "–")),
            *(str(a.axes.get(k, "–")) for k in extra),
            *(_fmt(entry["mean"][k], entry["std"][k]) for k in ("clean", *scores)),
        ]
        for a in measured
        for entry in a.robustness
    ]
    return markdown_table(header, body)


def _probe_words(key: str) -> str:
    """``drop_0.25`` -> ``Drop 25%``; ``crop_0.75`` -> ``Crop 75%``."""
    kind, fraction = key.split("_")
    return f"{kind.capitalize()} {float(fraction) * 100:g}%"


def _probe_phrase(key: str) -> str:
    """``drop_0.5`` -> ``dropping 50% of the patch tokens``; ``zero_0.5`` -> ``zeroing 50% of the
    patches``; ``crop_0.75`` -> ``a 75% centre crop``."""
    kind, fraction = key.split("_")
    share = f"{float(fraction) * 100:g}%"
    return {
        "drop": f"dropping {share} of the patch tokens",
        "zero": f"zeroing {share} of the patches",
        "crop": f"a {share} centre crop",
    }[kind]


def robustness_sentences(aggregates: Sequence[Aggregate]) -> list[str]:
    """Per probe (the largest masking share, dropped and zeroed; each crop): the mean change in accuracy it brings the
    ViTs and the CNNs (probed − clean, over their robustness rows that have it), and per variant axis
    studied, each value against the axis's default (or its first value) over rows matched on every
    other axis."""
    rows = [(a, entry) for a in aggregates for entry in a.robustness]
    if not rows:
        return []

    def change(entry: dict[str, Any], key: str) -> float | None:
        probed = entry["mean"][key]
        return None if probed is None else probed - known(entry["mean"], "clean")

    def plural(n: int, what: str) -> str:
        return f"{n} {what}{'s' if n != 1 else ''}"

    probes = [k for k in rows[0][1]["mean"] if k != "clean"]
    largest = max((float(k.split("_")[1]) for k in probes if not k.startswith("crop")), default=0.0)
    keys = [k for k in probes if k.startswith("crop") or (largest > 0 and float(k.split("_")[1]) == largest)]
    out = []
    for key in keys:
        what = _probe_phrase(key)
        parts = []
        for kind, name in (("vit", "ViTs"), ("cnn", "CNNs")):
            found = [c for a, e in rows if a.kind == kind and (c := change(e, key)) is not None]
            if found:
                parts.append(f"by {_signed(statistics.fmean(found))} for the {name} ({plural(len(found), 'row')})")
        out.append(f"{what[0].upper() + what[1:]} changes accuracy {_join(parts)}.")
        for name, default in VARIANTS.items():
            vits = [(a, e) for a, e in rows if a.kind == "vit" and name in a.axes and change(e, key) is not None]
            values = list(dict.fromkeys(a.axes[name] for a, _ in vits))
            if len(values) < 2:
                continue
            base_value = default if default in values else values[0]
            base = {_cell_key(a.axes, name): e for a, e in vits if a.axes[name] == base_value}
            for value in (v for v in values if v != base_value):
                matched = [
                    (base[k], e) for a, e in vits if a.axes[name] == value and (k := _cell_key(a.axes, name)) in base
                ]
                if not matched:
                    continue
                mine = statistics.fmean(cast(float, change(e, key)) for _, e in matched)
                theirs = statistics.fmean(cast(float, change(b, key)) for b, _ in matched)
                out.append(
                    f"Under {what}, the ViT with {variant_words(name, value)} changes by {_signed(mine)} against "
                    f"{_signed(theirs)} with {variant_words(name, base_value)} "
                    f"(mean over {plural(len(matched), 'matched row')})."
                )
    return out


def leads_table(leads: Sequence[Lead]) -> list[str]:
    """Markdown lines: per cell, both models' parameters and best val accuracy, the lead, its spread
    and the verdict."""
    names = [k for k in leads[0].axes if k != "rows"] if leads else []
    header = [
        "Rows",
        *("CNN" if n == "cnn" else n.capitalize() for n in names),
        "ViT params",
        "CNN params",
        "ViT best val",
        "CNN best val",
        "Lead (ViT − CNN)",
        "Spread",
        "Leader",
        "Verdict",
    ]
    body = [
        [
            _rows_text(lead.axes, lead.train_rows),
            *(str(lead.axes[n]) for n in names),
            f"{lead.vit['params']:,.0f}",
            f"{lead.cnn['params']:,.0f}",
            f"{lead.vit['best_val_acc']:.4f}",
            f"{lead.cnn['best_val_acc']:.4f}",
            _signed(lead.lead, 4),
            "–" if lead.spread is None else f"{lead.spread:.4f}",
            lead.leader,
            lead.verdict,
        ]
        for lead in leads
    ]
    return markdown_table(header, body)


def cost_lines(costs: Sequence[dict[str, Any]]) -> list[str]:
    header = [
        "Patch",
        "Tokens",
        "Attention entries (per head, per layer)",
        "vs first",
        "Forward FLOPs per image",
        "ViT parameters",
    ]
    body = [
        [
            str(c["patch"]),
            f"{c['tokens']:,}",
            f"{c['entries']:,}",
            f"{c['ratio']:,.2f}x",
            f"{c['flops']:,}",
            f"{c['params']:,}" if c["params"] is not None else "–",
        ]
        for c in costs
    ]
    return markdown_table(header, body)


def recipe_augment(augment: str | AugmentConfig) -> str:
    """A recipe's augmentation in words: ``preset light``, ``erasing=0.25``, or ``none``."""
    if isinstance(augment, str):
        return f"preset {augment}"
    default = AugmentConfig()
    changed = [
        f"{f.name}={getattr(augment, f.name)}"
        for f in fields(AugmentConfig)
        if getattr(augment, f.name) != getattr(default, f.name)
    ]
    return ", ".join(changed) or "none"


def attention_lines(result: CompareResult) -> list[str]:
    """The report's section of per-head attention figures for the best ViT (empty without them)."""
    if "reason" in result.attention:
        return [
            "## What the best ViT attends to",
            "",
            result.attention["reason"][0].upper() + result.attention["reason"][1:] + ".",
            "",
        ]
    if not result.attention.get("files"):
        return []
    lines = [
        "## What the best ViT attends to",
        "",
        f"Per-head attention of **{result.attention['label']}** (the ViT run with the best validation "
        "accuracy, `" + result.attention["run"] + "`) for its most confident correct and wrong validation "
        "predictions, every layer. Titles give each head's largest weight on one key (max) and its spread "
        "(max − min), the statistic the textbook's table quotes (uniform: 1/N on every key, max − min 0). "
        "Compare the wrong rows with the right ones: attention that looks normal on a confident mistake is no "
        "explanation of it (`vitlab explain --audit` tests the maps).",
        "",
    ]
    return lines + [f"![{Path(f).stem.replace('_', ' ')}]({f})" for f in result.attention["files"]] + [""]


def robustness_lines(result: CompareResult, aggregates: Sequence[Aggregate]) -> list[str]:
    """The report's section on masked patches and centre crops (empty when not measured)."""
    table = robustness_table(aggregates)
    if not table:
        return []
    data = result.data
    split = "test" if data["test"] is not None else "validation"
    images = data["test"] if data["test"] is not None else data["val"]
    return [
        "## Robustness: masked patches and centre crops",
        "",
        f"Every model (the checkpoint chosen by validation) scored on the {split} split ({images:,} images). "
        "*Clean*: as is. A random share f of each image's patches is removed, the same patches for every "
        "model on that patch grid (one generator, seed 0), in two ways. *Drop f*: the ViT's blocks run "
        "without those patch tokens, as MAE's encoder does, the kept ones keeping their positions (`–` for a "
        "CNN, and for a ViT that cannot run on a subset of its tokens: a relative position bias; window, "
        "low-rank or sparse attention; token merging). *Zero f*: the patches' pixels set to zero in the "
        "normalised input (the training mean), for every model; a CNN is masked on the patch grid of each "
        "ViT it meets (the Patch grid column). *Crop c*: the central c of each side, resized back to the full "
        f"image (bilinear). Mean ± standard deviation over {result.config.seeds} seed"
        f"{'s' if result.config.seeds > 1 else ''}.",
        "",
        *table,
        "",
    ]


def skipped_summary(skipped: Sequence[dict[str, Any]]) -> list[str]:
    """One line per reason among a plan's ``skipped`` combinations, naming the axis values all of its
    combinations share: ``patch 2, stem resnet (4 combinations): the ResNet stem ...``."""
    by_reason: dict[str, list[dict[str, Any]]] = {}
    for skip in skipped:
        by_reason.setdefault(skip["reason"], []).append(skip["axes"])
    lines = []
    for reason, combos in by_reason.items():
        shared = {k: v for k, v in combos[0].items() if all(c[k] == v for c in combos)}
        count = f" ({len(combos)} combinations)" if len(combos) > 1 else ""
        lines.append(f"{', '.join(f'{k} {v}' for k, v in shared.items())}{count}: {reason}")
    return lines


def skipped_lines(result: CompareResult) -> list[str]:
    """The report's list of the combinations the study skipped (empty when none was)."""
    lines = skipped_summary(result.plan.skipped)
    return ["## Skipped combinations", "", *(f"- {line}." for line in lines), ""] if lines else []


def diverged_lines(result: CompareResult) -> list[str]:
    """The report's list of runs whose loss stopped being finite (empty when none did)."""
    runs = [r for r in result.records.values() if r.diverged]
    if not runs:
        return []
    return [
        "## Diverged runs",
        "",
        f"{len(runs)} run{'s' if len(runs) > 1 else ''} stopped when the loss was no longer finite; each is "
        "counted in the tables with a constant guess's accuracy (the validation split's most frequent class) "
        "and no ECE:",
        "",
        *(
            f"- {r.label}, {describe_cell(r.axes, r.train_rows)[3:]}, seed {r.axes.get('seed', 0)} ({r.seconds:.1f} s)."
            for r in runs
        ),
        "",
    ]


def variant_lines(result: CompareResult) -> list[str]:
    """The report's paragraph on the ViT variants studied (empty when none is)."""
    cfg = result.config
    studied = {axis.name: axis.values for axis in result.plan.axes if axis.name in VARIANTS}
    if not studied:
        return []
    lines = ["## ViT variants", ""]
    if "attention" in studied:
        lines.append(
            f"- **Attention** ({', '.join(studied['attention'])}): each kind trains the same ViT with its "
            "attention replaced (`window`: windows of half the patch grid's side, shifted in every other "
            "block, mean pooling; `lowrank`: keys and values projected to half the tokens; `latent`: a "
            "quarter of the "
            "tokens as latents; `sparse`: a band of one grid row, every grid-row-th token and the class "
            "token). `tome` is the full-attention ViT, trained once, evaluated with token merging "
            "of half its patch tokens over the blocks (front-loaded schedule), without retraining; its "
            "accuracy is that of the trained model (the checkpoint chosen by validation) with merging, and "
            "Agreement is the share of validation images on which it predicts what the unmerged model "
            "predicts."
        )
    if "pretrain" in studied:
        images = (
            "every image of the dataset (validation and test images included, their labels unused)"
            if cfg.pretrain_images == "all"
            else "the training pool (labels unused)"
        )
        lines.append(
            f"- **Pretraining** ({', '.join(studied['pretrain'])}): the ViT is pretrained without labels for "
            f"{cfg.pretrain_epochs} epoch{'s' if cfg.pretrain_epochs > 1 else ''} on {images}, once per "
            f"seed and ViT shape, then fine-tuned on the "
            f"cell's labelled rows with layer-wise learning-rate decay {cfg.layer_decay:g}. Its Seconds "
            "include "
            "the pretraining."
        )
    if "distill" in studied:
        kind = (
            f"soft (KL at temperature {cfg.distill_temperature:g}, weight {cfg.distill_alpha:g})"
            if cfg.distill_kind == "soft"
            else "hard (the teacher's argmax as a second label)"
        )
        lines.append(
            f"- **Distillation** ({', '.join(studied['distill'])}): with `cnn` the ViT gets a DeiT "
            f"distillation token and head and learns from the cell's own size-matched CNN, {kind}; at "
            "inference it averages its two heads."
        )
    if "position" in studied:
        lines.append(
            f"- **Positions** ({', '.join(studied['position'])}): `abs` keeps the model's absolute "
            "position table added to the patch tokens; `rel` replaces it with a learned relative position "
            "bias on the attention scores in every block (one entry per grid offset and head, timm's "
            "`VisionTransformerRelPos`), `rel-shared` with one such table for all blocks; `none` has no "
            "positions at all."
        )
    if "stem" in studied:
        lines.append(
            f"- **Stems** ({', '.join(studied['stem'])}): `patch` is the model's own patchify embedding (one "
            "linear map per patch); `conv` runs stride-2 3x3 convolutions with BatchNorm and ReLU (as many "
            "as the factors of 2 in the patch, Xiao et al. 2021) and `resnet` timm's ResNetV2 stem (7x7 "
            "convolution of stride 2 and max-pooling: a reduction of 4) before a projection of the rest of "
            "the patch; the token grid is the same."
        )
    if "pool" in studied:
        lines.append(
            f"- **Pooling** ({', '.join(studied['pool'])}): `token` prepends a class token and classifies "
            "from it alone; `mean` / `max` classify from the mean / maximum over the patch tokens."
        )
    if any(name in studied for name in ("position", "stem", "pool")):
        lines.append(
            "- Each cell's CNN is matched to that cell's ViT, so a stem, a bias table or a class token that "
            "changes the ViT's parameter count may change the CNN's widths: the Parameters column gives "
            "both."
        )
    return lines + [""]


def normalization_words(normalization: str) -> str:
    """How the pixels reached the models, in words."""
    return (
        "pixels in [0, 1] as loaded (no standardisation), as the textbook feeds them"
        if normalization == "unit"
        else "pixels standardised by the training rows' per-channel mean and standard deviation"
    )


def execution_words(execution: dict[str, Any]) -> str:
    """``2 processes at once, 1 torch thread each`` / ``Ray at local, 1 CPU each``."""
    threads = execution.get("threads_per_run")
    each = (
        f"{threads} torch thread{'s' if threads != 1 else ''} each"
        if isinstance(threads, int)
        else "torch's default threads each"
    )
    if execution.get("executor") == "ray":
        return f"Ray tasks on {execution['address']}, {each}"
    jobs = execution.get("jobs", 1)
    return f"{jobs} process{'es' if jobs > 1 else ''} at once, {each}" if jobs > 1 else f"one run at a time, {each}"


def padding_lines(result: CompareResult) -> list[str]:
    """A sentence on the patch sizes that zero-pad the image (empty when none does)."""
    _, height, width = result.data["image_shape"]
    padding = [p for p in result.config.patch_sizes if result.config.pad and (height % p or width % p)]
    if not padding:
        return []
    sizes = ", ".join(f"patch {p}: {padded(height, p)}x{padded(width, p)}" for p in padding)
    return [
        f"Patch{'es' if len(padding) > 1 else ''} {', '.join(map(str, padding))} "
        f"do{'es' if len(padding) == 1 else ''} not divide the {height}x{width} images: the ViT zero-pads its "
        f"(normalised) input, bottom and right, to a multiple of the patch ({sizes}).",
        "",
    ]


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
                _rows_text(a.axes, a.train_rows),
                published("params"),
                f"{m['params']:,.0f}",
                published("best_val_acc"),
                _fmt(m["best_val_acc"], s["best_val_acc"]),
                published("final_train_acc"),
                _fmt(m["final_train_acc"], s["final_train_acc"]),
                published("seconds", 1),
                _fmt(m["seconds"], s["seconds"], 1),
                _fmt(m["test_acc"], s["test_acc"]),
            ]
        )
    return markdown_table(header, body)


def _difference(metric: str, value: float, band: float | None = None) -> str:
    """A ViT-minus-CNN difference: ``+0.0370 ± 0.0120`` (band: 2 standard errors), or for seconds the
    ratio ``x1.45 (x1.30–x1.62)``."""
    if metric == "seconds":
        text = f"×{math.exp(value):.2f}"
        return text if band is None else f"{text} (×{math.exp(value - band):.2f}–×{math.exp(value + band):.2f})"
    return _signed(value, 4) + ("" if band is None else f" ± {band:.4f}")


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
            _join(_phrase_axes({k: x for k, x in v.setting.items() if k in varying}))
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
            _rows_text(a.axes, a.train_rows),
            _fmt(a.mean["final_train_acc"], a.std["final_train_acc"]),
            _fmt(a.mean["train_eval_acc"], a.std["train_eval_acc"]),
            _fmt(a.mean["best_val_acc"], a.std["best_val_acc"]),
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


def render_markdown(
    result: CompareResult,
    aggregates: Sequence[Aggregate],
    leads: Sequence[Lead],
    sentences: Sequence[str],
    costs: Sequence[dict[str, Any]],
    verdicts: Sequence[Verdict] = (),
) -> str:
    """The whole ``report.md`` (with the textbook's section when ``verdicts`` are given)."""
    cfg, data = result.config, result.data
    recipe = TrainConfig.from_recipe(cfg.recipe)
    chans, height, width = data["image_shape"]
    test = f", {data['test']:,} test" if data["test"] is not None else ", no test split"
    cnns = [
        f"CNN `{cfg.cnn}` family with widths matched to the ViT's parameter count at each patch size (within "
        f"±{cfg.param_tolerance:.0%})"
        if name == "matched"
        else f"the {CNN_WORDS[name]} CNN `{TEXTBOOK_CNN[0]}` with widths "
        f"{'-'.join(map(str, TEXTBOOK_CNN[1]['widths']))} and no BatchNorm"
        for name in cfg.cnns
    ]
    lines = [
        f"# {cfg.name}: ViT against a CNN of the same size",
        "",
        f"Dataset **{data['dataset']}** ({height}x{width}x{chans}, {data['num_classes']} classes): training pool "
        f"{data['pool']:,} images, {data['val']:,} validation{test}; {normalization_words(cfg.normalization)}. "
        f"ViT `{cfg.vit}`; {_join(cnns)}. "
        f"Both train with recipe `{cfg.recipe}` ({recipe.optimizer}, lr {recipe.lr:g}, {recipe.schedule} schedule, "
        f"batch {recipe.batch_size}, weight decay {recipe.weight_decay:g}, label smoothing {recipe.label_smoothing:g}; "
        f"its own augmentation, augment value `recipe`, is {recipe_augment(recipe.augment)}) for {cfg.epochs} "
        f"epoch{'s' if cfg.epochs > 1 else ''}; each cell uses seeds 0..{cfg.seeds - 1} "
        f"({cfg.seeds} per cell), the same seed giving both models the same split and batch order. "
        f"{len(result.records)} runs in {result.seconds:,.1f} s ({result.cpu_seconds:,.1f} s of CPU time; "
        f"{execution_words(result.execution)}).",
        "",
        *padding_lines(result),
        *(textbook_lines(result, aggregates, verdicts) if verdicts else []),
        "## Results",
        "",
        f"Mean ± standard deviation over {cfg.seeds} seed(s)" + (" (one seed: no spread)." if cfg.seeds == 1 else "."),
        "",
        *results_table(aggregates),
        "",
        *variant_lines(result),
        *skipped_lines(result),
        *diverged_lines(result),
        *robustness_lines(result, aggregates),
        "## Who leads",
        "",
        *leads_table(leads),
        "",
        "## Conclusions",
        "",
        *(f"- {s}" for s in sentences),
        "",
    ]
    if costs:
        lines += [
            "## Token cost per patch size",
            "",
            f"From the cost model (`vitlab cost`) for `{cfg.vit}` on {height}x{width} images (padded ones "
            "on the padded image): attention compares every token with every other, so its entries grow with "
            "the square of the token count.",
            "",
            *cost_lines(costs),
            "",
        ]
    lines += [
        "## Figures",
        "",
        "![Best validation accuracy against training rows](accuracy_vs_rows.png)",
        "",
        "![Validation accuracy per epoch](learning_curves.png)",
        "",
        "![Train − validation gap](gap.png)",
        "",
        *attention_lines(result),
        "## Definitions",
        "",
        "- **Best val accuracy**: the highest validation accuracy over the epochs (selected on the validation "
        "set itself, so optimistic alike for both models).",
        "- **Final train accuracy**: accuracy on the last epoch's training batches as trained on (augmented, "
        "training mode).",
        "- **Gap** = final train accuracy − best val accuracy; large and positive means memorising.",
        "- **ECE**: expected calibration error on the validation set at the best epoch.",
        "- **Test accuracy**: the checkpoint chosen by validation (the best epoch's weights) on the test split, "
        "where the dataset has one.",
        "- **Seconds**: the training run's wall time, validation included.",
        "- **Images/s**, **Peak MB**: the model's forward throughput (best of 3 rounds) and the peak memory "
        "its forward pass allocates, on one batch of up to 256 validation images in eval mode.",
        "- **Lead** = mean over seeds of (ViT − CNN best val accuracy), paired by seed; **spread** = the "
        "sample standard deviation of those per-seed differences. A lead is *larger than the spread* when its "
        "size exceeds the spread, otherwise *within the spread*; with one seed the spread is unknown.",
        "",
    ]
    return "\n".join(lines)


# results.json fields that measure time or the machine, not what was learnt.
TIMINGS = ("seconds", "cpu_seconds", "images_per_s", "peak_mb")


def results_numbers(results: dict[str, Any]) -> dict[str, Any]:
    """A ``results.json`` document's runs, aggregates, leads, conclusions, verdicts, axes and data,
    without :data:`TIMINGS` at any depth: what must not change with where or how many at once the
    runs ran."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in TIMINGS}
        return [strip(v) for v in value] if isinstance(value, list) else value

    kept = ("runs", "aggregates", "leads", "conclusions", "textbook", "axes", "data")
    return strip({k: results[k] for k in kept if k in results})


def write_report(result: CompareResult, out_dir: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``report.md`` and the PNG figures into ``out_dir`` (every file through
    :func:`~vitlab.experiments.files.write_file`); return their paths."""
    out = Path(out_dir)
    aggregates = aggregate(list(result.records.values()))
    leads = compute_leads(result)
    costs = token_costs(result)
    sentences = conclusions(leads, {c["patch"]: c["tokens"] for c in costs}) + robustness_sentences(aggregates)
    verdicts = claim_verdicts(result.plan.cells, result.records) if result.config.preset == "textbook" else []
    files = {name: out / filename for name, filename in FIGURES.items()}
    plot_accuracy_vs_rows(aggregates, files["accuracy_vs_rows"])
    plot_learning_curves(aggregates, files["learning_curves"])
    plot_gap(aggregates, files["gap"])
    results = {
        "config": result.config.to_dict(),
        "data": result.data,
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
        "environment": {
            "vitlab": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            "threads": torch.get_num_threads(),
            "cuda": torch.cuda.is_available(),
            **result.execution,
        },
        "axes": [asdict(axis) for axis in result.plan.axes],
        "runs": [record.to_dict() for record in result.records.values()],
        "skipped": result.plan.skipped,
        "aggregates": [asdict(a) for a in aggregates],
        "leads": [{**asdict(lead), "leader": lead.leader, "verdict": lead.verdict} for lead in leads],
        "conclusions": sentences,
        "token_cost": costs,
        "attention": result.attention,
    }
    if verdicts:
        results["textbook"] = {
            "published": [{"model": m, "rows": r, **v} for (m, r), v in PUBLISHED.items()],
            "verdicts": [{**asdict(v), "verdict": v.verdict} for v in verdicts],
        }
    files["results"] = write_file(out / RESULTS, json.dumps(results, indent=2) + "\n")
    files["report"] = write_file(out / REPORT, render_markdown(result, aggregates, leads, sentences, costs, verdicts))
    return files
