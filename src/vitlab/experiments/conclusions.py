"""The report's conclusions: sentences that follow from a study's numbers, nothing written in
advance -- who leads each cell, the tally, the trends with rows, augmentation, patch size and the
variants studied, calibration, and what masking and cropping cost."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any, cast

from .aggregates import Aggregate, Lead, known
from .axes import VARIANTS, augment_words, join_words, phrase_axes, variant_words
from .tables import signed


def describe_cell(axes: dict[str, Any], train_rows: int) -> str:
    """``At 300 rows with patch 2 and no augmentation``: a cell in words (seed ignored)."""
    parts = phrase_axes(axes)
    rows = f"{train_rows:,} rows" + (" (the full pool)" if "rows" in axes and axes["rows"] is None else "")
    return f"At {rows}" + (f" with {join_words(parts)}" if parts else "")


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
        parts = phrase_axes(small.axes)
        where = f"With {join_words(parts)}, the" if parts else "The"
        out.append(
            f"{where} ViT's margin (ViT − CNN) goes from {signed(small.lead)} at "
            f"{small.train_rows:,} rows to {signed(large.lead)} at {large.train_rows:,}: {trend}."
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
        f"The train−val gap averages {signed(vit_gap)} for the ViT and {signed(cnn_gap)} for the CNN "
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
            f"{words[0].upper() + words[1:]} changes best validation accuracy by {signed(d_vit)} for "
            f"the ViT and {signed(d_cnn)} for the CNN (mean over {len(matched)} matched cells)."
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
                f"{signed(change)} "
                f"against {against} ({cells}), with training wall time x{seconds:.2f}"
                + (" (pretraining included)" if name == "pretrain" else "")
                + f", {cost}."
            )
    return out


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
                parts.append(f"by {signed(statistics.fmean(found))} for the {name} ({plural(len(found), 'row')})")
        out.append(f"{what[0].upper() + what[1:]} changes accuracy {join_words(parts)}.")
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
                    f"Under {what}, the ViT with {variant_words(name, value)} changes by {signed(mine)} against "
                    f"{signed(theirs)} with {variant_words(name, base_value)} "
                    f"(mean over {plural(len(matched), 'matched row')})."
                )
    return out
