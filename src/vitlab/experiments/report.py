"""A study's files: ``results.json`` (every run, aggregate, lead and conclusion), ``report.md`` (the
tables, sections and conclusions in one page) and the figures (:func:`write_report`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..runs.layout import REPORT, RESULTS
from .aggregates import Aggregate, Lead, aggregate, compute_leads
from .axes import CNN_WORDS, join_words
from .conclusions import conclusions, robustness_sentences
from .figures import plot_accuracy_vs_rows, plot_gap, plot_learning_curves
from .files import write_file
from .records import CompareResult
from .sections import (
    attention_lines,
    diverged_lines,
    environment,
    execution_words,
    normalization_words,
    padding_lines,
    recipe_augment,
    robustness_lines,
    skipped_lines,
    variant_lines,
)
from .tables import cost_lines, leads_table, results_table, token_costs
from .textbook import PUBLISHED, TEXTBOOK_CNN
from .textbook_report import Verdict, claim_verdicts, textbook_lines
from .training import TrainConfig
from .tuning import tune_lines

FIGURES = {"accuracy_vs_rows": "accuracy_vs_rows.png", "learning_curves": "learning_curves.png", "gap": "gap.png"}


# The report's closing definitions.
DEFINITIONS = (
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
)


def study_paragraph(result: CompareResult) -> str:
    """The report's opening paragraph: the data, the models, the recipe, the seeds and the runs."""
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
    return (
        f"Dataset **{data['dataset']}** ({height}x{width}x{chans}, {data['num_classes']} classes): training pool "
        f"{data['pool']:,} images, {data['val']:,} validation{test}; {normalization_words(cfg.normalization)}. "
        f"ViT `{cfg.vit}`; {join_words(cnns)}. "
        f"Both train with recipe `{cfg.recipe}` ({recipe.optimizer}, lr {recipe.lr:g}, {recipe.schedule} schedule, "
        f"batch {recipe.batch_size}, weight decay {recipe.weight_decay:g}, label smoothing {recipe.label_smoothing:g}; "
        f"its own augmentation, augment value `recipe`, is {recipe_augment(recipe.augment)}) for {cfg.epochs} "
        f"epoch{'s' if cfg.epochs > 1 else ''}; each cell uses seeds 0..{cfg.seeds - 1} "
        f"({cfg.seeds} per cell), the same seed giving both models the same split and batch order. "
        f"{len(result.records)} runs in {result.seconds:,.1f} s ({result.cpu_seconds:,.1f} s of CPU time; "
        f"{execution_words(result.execution)})."
    )


def cost_section(result: CompareResult, costs: Sequence[dict[str, Any]]) -> list[str]:
    """The report's section on the token cost per patch size (empty without costs)."""
    if not costs:
        return []
    _, height, width = result.data["image_shape"]
    return [
        "## Token cost per patch size",
        "",
        f"From the cost model (`vitlab cost`) for `{result.config.vit}` on {height}x{width} images (padded ones "
        "on the padded image): attention compares every token with every other, so its entries grow with "
        "the square of the token count.",
        "",
        *cost_lines(costs),
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
    cfg = result.config
    lines = [
        f"# {cfg.name}: ViT against a CNN of the same size",
        "",
        study_paragraph(result),
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
        *tune_lines(result),
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
    lines += cost_section(result, costs)
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
        *DEFINITIONS,
    ]
    return "\n".join(lines)


# results.json fields that measure time or the machine, not what was learnt.
TIMINGS = ("seconds", "cpu_seconds", "images_per_s", "peak_mb", "step_seconds")


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
        "environment": environment(result.execution),
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
