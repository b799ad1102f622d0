"""Each pitfall's verdicts from its studies' records: seed-paired effects (:func:`effect_parts`), the
trend of an effect over data sizes, a point claim, an exact token count, and a claim's verdict over its
conditions (:func:`overall`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from ...models import VisionTransformer, build_registered
from ...reporting import judge
from ..axes import augment_words, variant_words
from ..records import RunRecord
from ..textbook import difference
from .catalogue import Effect, Profile, pitfalls_for
from .studies import Study


@dataclass
class Part:
    """A claim measured in one ``condition`` (the grid's other axes, in words): the mean difference and its
    two-standard-error band over ``seeds`` paired seeds, the means of the two sides, the verdict, and a
    ``note`` (diverged runs, token counts)."""

    condition: str
    mean: float
    band: float | None
    seeds: int
    value_mean: float
    baseline_mean: float
    verdict: str
    note: str = ""
    differences: list[float] = field(default_factory=list)  # the per-seed differences behind ``mean``


@dataclass
class Verdict:
    """A pitfall's verdict for one effect (or its point claim or count), from its parts."""

    key: str
    claim: str
    source: str
    measured: str
    parts: list[Part]
    verdict: str


@dataclass
class PitfallsResult:
    """What :func:`run_pitfalls` returns."""

    profile: Profile
    reason: str
    studies: list[Study]
    verdicts: list[Verdict]
    seconds: float
    cpu_seconds: float
    execution: dict[str, Any]
    files: dict[str, Path] = field(default_factory=dict)


def overall(parts: Sequence[Part]) -> str:
    """A claim's verdict over its conditions (see the module doc)."""
    found = [p.verdict for p in parts]
    if found and all(v == "reproduced" for v in found):
        return "reproduced"
    if "reproduced" in found:
        return "holds only when " + "; ".join(p.condition for p in parts if p.verdict == "reproduced")
    if "not reproduced" in found:
        return "not reproduced"
    return "inconclusive"


def value_words(axis: str, value: Any) -> str:
    if axis == "patch":
        return f"patch {value}"
    if axis == "augment":
        return augment_words(value)
    if axis == "rows":
        return "the whole pool" if value is None else f"{value:,} rows"
    return variant_words(axis, value)


def _condition(axes: dict[str, Any], varying: set[str]) -> str:
    return ", ".join(value_words(k, v) for k, v in axes.items() if k in varying) or "the base cell"


def effect_parts(study: Study, effect: Effect) -> list[Part]:
    """The seed-paired parts of ``effect`` in ``study``, one per setting of the grid's other axes."""
    cells, records = study.plan.cells, study.records
    varying = {a.name for a in study.plan.axes if len(a.values) > 1} - {"seed", effect.axis}
    if effect.axis == "cnn":
        pairs: dict[str, list[tuple[RunRecord, RunRecord]]] = {}
        for cell in cells:
            if cell.cnn in records:
                epochs = study.config.epochs
                where = f"{_condition(cell.axes, {'rows'})}, {epochs} epoch{'s' if epochs != 1 else ''}"
                pairs.setdefault(where, []).append((records[cell.vit], records[cell.cnn]))
    else:
        sides: dict[tuple[str, Any, Any], RunRecord] = {}
        for cell in cells:
            own = {k: v for k, v in cell.axes.items() if k in varying}
            sides[_condition(own, varying), cell.axes.get(effect.axis), cell.axes["seed"]] = records[cell.vit]
        pairs = {}
        for (condition, value, seed), record in sides.items():
            if value == effect.value and (condition, effect.baseline, seed) in sides:
                pairs.setdefault(condition, []).append((record, sides[condition, effect.baseline, seed]))
    parts = []
    for condition, found in pairs.items():
        values = [getattr(a, effect.metric) for a, _ in found]
        bases = [getattr(b, effect.metric) for _, b in found]
        if any(v is None for v in values + bases):
            continue
        differences = [difference(effect.metric, a, b) for a, b in zip(values, bases)]
        mean, band, verdict = judge(differences, effect.sign)
        diverged = [r for pair in found for r in pair if r.diverged]
        note = f"{len(diverged)} of {2 * len(found)} runs diverged" if diverged else ""
        part = Part(condition, mean, band, len(found), statistics.fmean(values), statistics.fmean(bases), verdict, note)
        part.differences = differences
        parts.append(part)
    return parts


def trend_part(small: Part, large: Part, sign: int) -> Part:
    """How a paired difference moves from ``small``'s condition to ``large``'s (two sets of seeds, unpaired):
    the change of the means and two standard errors of that change, judged for ``sign``."""
    a, b = small.differences, large.differences
    change = statistics.fmean(b) - statistics.fmean(a)
    band = (
        None
        if len(a) < 2 or len(b) < 2
        else 2 * math.sqrt(statistics.variance(a) / len(a) + statistics.variance(b) / len(b))
    )
    verdict = (
        "inconclusive"
        if band is None
        else "reproduced"
        if sign * change > band
        else "not reproduced"
        if sign * change < -band
        else "inconclusive"
    )
    return Part(
        f"from {small.condition} to {large.condition}",
        change,
        band,
        min(len(a), len(b)),
        large.mean,
        small.mean,
        verdict,
    )


def point_parts(study: Study, metric: str, published: float) -> list[Part]:
    """A point claim: vitlab's mean ``metric`` over the seeds, reproduced when ``published`` lies within two
    standard errors of it, else not reproduced."""
    values = [getattr(study.records[cell.vit], metric) for cell in study.plan.cells]
    values = [v for v in values if v is not None]
    if not values:
        return []
    mean = statistics.fmean(values)
    band = 2 * statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else None
    verdict = "inconclusive" if band is None else "reproduced" if abs(published - mean) <= band else "not reproduced"
    return [
        Part(
            _condition(study.plan.cells[0].axes, {"rows"}),
            mean - published,
            band,
            len(values),
            mean,
            published,
            verdict,
        )
    ]


def count_parts(study: Study, shape: dict[str, Any]) -> list[Part]:
    """The overlapping ViT's tokens counted by running it, against ``H W / P^2`` and ``floor((H - P) / S) + 1``
    per side: reproduced (exactly) when the run's count differs from ``H W / P^2`` and equals the formula."""
    parts = []
    height, width = shape["img_size"]
    for run in study.plan.runs:
        if run.kind != "vit" or run.axes.get("seed") != 0:
            continue
        model = cast(VisionTransformer, build_registered(run.model, **shape, **run.overrides).eval())
        with torch.no_grad():
            tokens = model.forward_features(torch.zeros(1, shape["in_chans"], height, width)).shape[1]
        tokens -= model.num_prefix_tokens
        patch, stride = run.overrides["patch_size"], run.overrides.get("patch_stride") or run.overrides["patch_size"]
        naive = height * width // patch**2
        formula = ((height - patch) // stride + 1) * ((width - patch) // stride + 1)
        miscount = tokens != naive and tokens == formula
        verdict = "reproduced" if miscount else "not reproduced" if stride != patch else "inconclusive"
        if stride == patch:
            continue
        parts.append(
            Part(
                f"patch {patch}, stride {stride}",
                float(tokens - naive),
                0.0,
                1,
                float(tokens),
                float(naive),
                verdict,
                f"tokens counted {tokens} = floor(({height} - {patch}) / {stride}) + 1 squared = {formula}; "
                f"H W / P^2 = {naive}",
            )
        )
    return parts


def verdicts(studies: Sequence[Study], profile: Profile, shape: dict[str, Any]) -> list[Verdict]:
    """Every pitfall's verdicts from the studies' records."""
    out = []
    by_key: dict[str, list[Study]] = {}
    for study in studies:
        by_key.setdefault(study.pitfall, []).append(study)
    for pitfall in pitfalls_for(profile):
        members = by_key[pitfall.key]
        if pitfall.count:
            parts = [p for s in members for p in count_parts(s, shape)]
            out.append(Verdict(pitfall.key, pitfall.claim, pitfall.source, "tokens", parts, overall(parts)))
        if pitfall.published is not None:
            parts = [p for s in members for p in point_parts(s, "test_acc", pitfall.published)]
            out.append(Verdict(pitfall.key, pitfall.claim, pitfall.source, "test accuracy", parts, overall(parts)))
        for effect in pitfall.effects:
            parts = [p for s in members for p in effect_parts(s, effect)]
            sides = f"{value_words(effect.axis, effect.value)} − {value_words(effect.axis, effect.baseline)}"
            measured = effect.words if effect.axis == "cnn" else f"{effect.words}: {sides}"
            out.append(Verdict(pitfall.key, pitfall.claim, pitfall.source, measured, parts, overall(parts)))
            if pitfall.trend and len(parts) > 1:
                trend = [trend_part(parts[0], parts[-1], -effect.sign)]
                words = f"{effect.words}, its change from the fewest rows to the most"
                out.append(Verdict(pitfall.key, pitfall.trend, pitfall.source, words, trend, overall(trend)))
    return out
