"""The pitfalls' files: ``results.json`` (every run, every verdict) and ``report.md`` (the verdict
table and each grid's results)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from ...reporting import markdown_table
from ...runs.layout import REPORT, RESULTS
from ..aggregates import aggregate
from ..files import write_file
from ..sections import environment, execution_words
from ..tables import results_table, signed
from .catalogue import NAME
from .studies import Study
from .verdicts import Part, PitfallsResult, Verdict, value_words


def _number(value: float) -> str:
    return f"{value:.4f}".replace("-", "−")


def part_words(verdict: Verdict, part: Part) -> str:
    """A part's measurement in words: the difference ± band over the seeds, the two sides' means, the note."""
    if verdict.measured == "tokens":
        return part.note
    seeds = f"{part.seeds} seed{'s' if part.seeds != 1 else ''}"
    band = "" if part.band is None else f" ± {part.band:.4f}"
    if verdict.measured == "test accuracy":
        return f"{part.value_mean:.4f}{band} ({seeds}) against the page's {part.baseline_mean:.4f}"
    if verdict.measured.startswith("training seconds"):
        ratio = f"×{math.exp(part.mean):.2f}"
        if part.band is not None:
            ratio += f" (×{math.exp(part.mean - part.band):.2f}–×{math.exp(part.mean + part.band):.2f})"
        text = f"{ratio}, {seeds}: {part.value_mean:.1f} s against {part.baseline_mean:.1f} s"
    else:
        text = (
            f"{signed(part.mean, 4)}{band}, {seeds}: {_number(part.value_mean)} against {_number(part.baseline_mean)}"
        )
    return text + (f"; {part.note}" if part.note else "")


def verdict_table(found: Sequence[Verdict]) -> list[str]:
    """Markdown lines: claim, source, what is measured, each condition's measurement and verdict, the verdict."""
    body = []
    for i, v in enumerate(found):
        same = i > 0 and found[i - 1].key == v.key and found[i - 1].claim == v.claim
        measured = (
            "<br>".join(
                f"{p.condition}: {part_words(v, p)} ({p.verdict})" if len(v.parts) > 1 else f"{part_words(v, p)}"
                for p in v.parts
            )
            or "no pair of runs measured it"
        )
        claim, source = ("(the same claim)", "") if same else (v.claim, v.source)
        body.append([claim, source, v.measured, measured, f"**{v.verdict}**"])
    return markdown_table(
        ["Claim", "Texts", "Measured", "vitlab (mean ± 2 SE of seed-paired differences)", "Verdict"], body
    )


def study_lines(study: Study) -> list[str]:
    """A study's heading, its grid in words and its results table (mean ± std over seeds)."""
    cfg = study.config
    rows = ", ".join(value_words("rows", r) for r in cfg.rows)
    head = f"### {study.pitfall}: {rows}, {cfg.epochs} epochs, {len(study.plan.runs)} runs"
    aggregates = aggregate(list(study.records.values()))
    lines = [head, "", *results_table(aggregates), ""]
    probed = [a for a in aggregates if a.mean.get("permuted_agreement") is not None]
    if probed:
        lines += [
            "Predictions that survive shuffled patches (agreement with the unshuffled ones, mean ± std over seeds):",
            "",
            *markdown_table(
                ["Model", "As trained", "Positions removed"],
                [
                    [
                        a.label,
                        f"{a.mean['permuted_agreement']:.4f} ± {a.std['permuted_agreement'] or 0:.4f}",
                        f"{a.mean['unpositioned_agreement']:.4f} ± {a.std['unpositioned_agreement'] or 0:.4f}",
                    ]
                    for a in probed
                ],
            ),
            "",
        ]
    if study.plan.skipped:
        lines += [f"Skipped: {s['reason']}." for s in study.plan.skipped] + [""]
    return lines


def render_pitfalls(result: PitfallsResult) -> str:
    """The whole ``report.md``."""
    profile = result.profile
    runs = {key for study in result.studies for key in study.records}
    trained = len(
        {
            repr((r.model, sorted(r.overrides.items()), sorted(r.train.items()), s.config.epochs))
            for s in result.studies
            for r in s.plan.runs
        }
    )
    seeds = result.studies[0].config.seeds
    lines = [
        "# The texts' pitfalls and claims, measured",
        "",
        f"Dataset **{profile.dataset}** ({result.reason}); ViT `{profile.vit}` (patch {profile.patch}), CNN "
        f"`{profile.cnn}` sized to it where a claim needs one; recipe `plain` (Adam 1e-3, batch 64, no warmup, no "
        f"augmentation), pixels in [0, 1], {seeds} seeds; each grid at {profile.rows:,} rows and {profile.epochs} "
        f"epochs unless its heading says otherwise. {trained} trainings ({len(runs)} run records over the grids) in "
        f"{result.seconds:,.0f} s ({result.cpu_seconds:,.0f} s of CPU; {execution_words(result.execution)}).",
        "",
        "## Verdicts",
        "",
        *verdict_table(result.verdicts),
        "",
        "Each claim is tested on seed-paired differences (the ViT with the switch minus the ViT without it, or "
        "the ViT minus its cell's CNN; for seconds their ratio, averaged as logarithms): in each condition "
        "*reproduced* when the mean lies beyond two standard errors in the claimed direction, *not reproduced* "
        "when beyond them the other way, *inconclusive* in between; over the conditions, *holds only when* "
        "names those where it is reproduced. The page's test accuracy is reproduced when it lies within two "
        "standard errors of vitlab's mean; a token count is exact. A run whose loss stops being finite counts "
        "as a constant guess of the most frequent class.",
        "",
        'Not measured here: "the data hunger starts at 196 tokens" -- 196 tokens on 28x28 images is patch 2, '
        f"whose attention forms (196 / 16)^2 = {(196 / 16) ** 2:.0f} times the patch-7 ViT's entries, beyond this "
        "preset's time; `vitlab compare --dataset fashion-mnist --patches 2,7 --rows 500,2000 --seeds 3` measures it.",
        "",
        "## The grids",
        "",
    ]
    shown: dict[tuple[str, ...], str] = {}
    for study in result.studies:
        keys = tuple(sorted(study.records))
        if keys in shown:
            lines += [f"### {study.pitfall}: the runs of {shown[keys]} above", ""]
            continue
        shown[keys] = study.pitfall
        lines += study_lines(study)
    return "\n".join(lines)


def write_pitfalls(result: PitfallsResult, out_dir: str | Path) -> dict[str, Path]:
    """``results.json`` (every run, every verdict) and ``report.md``."""
    out = Path(out_dir)
    document = {
        "preset": NAME,
        "profile": asdict(result.profile),
        "reason": result.reason,
        "seconds": result.seconds,
        "cpu_seconds": result.cpu_seconds,
        "environment": environment(result.execution),
        "verdicts": [asdict(v) for v in result.verdicts],
        "studies": [
            {
                "pitfall": s.pitfall,
                "config": s.config.to_dict(),
                "skipped": s.plan.skipped,
                "runs": [s.records[r.key].to_dict() for r in s.plan.runs],
            }
            for s in result.studies
        ],
    }
    return {
        "results": write_file(out / RESULTS, json.dumps(document, indent=2) + "\n"),
        "report": write_file(out / REPORT, render_pitfalls(result) + "\n"),
    }
