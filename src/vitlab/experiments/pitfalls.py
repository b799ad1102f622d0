"""The texts' pitfalls and claims, each measured: ``vitlab compare --preset pitfalls``.

Every pitfall is a small compare grid (:class:`Pitfall`: the fields of a
:class:`~vitlab.experiments.compare.CompareConfig` over the preset's base protocol) and the effects
that test its claim (:class:`Effect`). All grids are planned by
:func:`~vitlab.experiments.compare.plan_compare` and run together on one executor
(:func:`~vitlab.experiments.compare.execute_many`); runs that train the same thing in several grids
(the base ViT above all) train once.

Base protocol (the Keras page's, :data:`~vitlab.experiments.textbook.PRESET`): Fashion-MNIST, pixels in
[0, 1], ``vit-seed`` (patch 7, 16 tokens), recipe ``plain`` (Adam 1e-3, batch 64, no warmup, no
augmentation), :data:`SEEDS` seeds; the grids at 2,000 rows and 8 epochs unless they say otherwise. Without
Fashion-MNIST the preset runs on the embedded digits with ``vit-digits`` (patch 2, 16 tokens) and
proportionate rows (:data:`PROFILES`).

A claim is tested on seed-paired differences: the ViT with the switch against the ViT without it (same
split, batch order and initial draw), or the ViT against the CNN of the same cell. With ``n`` seeds, mean
``d`` and ``band`` = two standard errors, each condition's part is *reproduced* when ``s d > band`` for
the claim's sign ``s``, *not reproduced* when ``s d < -band``, *inconclusive* in between
(:func:`~vitlab.reporting.judge`). Over a claim's conditions: *reproduced* when every part is,
*holds only when ...* (the conditions where it is) when some are, *not reproduced* when none is and some
go the other way, else *inconclusive*. A point claim (the page's test accuracy) is reproduced when the
page's number lies within the band around vitlab's mean; a count (tokens of overlapping windows) is
exact. Nothing is written in: every verdict comes from the runs.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import torch

from .. import __version__
from ..data.registry import locate_dataset
from ..errors import ConfigError, DataError
from ..models import VisionTransformer, build_registered
from ..reporting import judge, markdown_table
from ..runs.layout import REPORT, RESULTS
from .compare import (
    CompareConfig,
    Plan,
    RunRecord,
    data_shape,
    execute_many,
    load_splits,
    plan_compare,
)
from .executors import Executor, LocalExecutor
from .figures import VARIANTS, augment_words, variant_words
from .files import open_study, write_file
from .report import aggregate, execution_words, results_table
from .textbook import difference

SEEDS = 3
NAME = "pitfalls"


@dataclass(frozen=True)
class Profile:
    """What the preset trains on one dataset: the models, the base cell (``rows`` for ``epochs``, ``patch``),
    the patch sizes and the overlapping stride to study, the data-size sweep ``(rows, epochs)`` (``None``: the
    whole pool), the learning rates of the post-norm grid, and the page's test-accuracy protocol (or none)."""

    dataset: str
    vit: str
    cnn: str
    rows: int
    epochs: int
    patch: int
    patches: tuple[int, ...]
    stride: int
    sweep: tuple[tuple[int | None, int], ...]
    lrs: tuple[float, ...]
    test_protocol: tuple[int, int] | None  # (rows, epochs) of the page's test accuracy


PROFILES = {
    "fashion-mnist": Profile(
        "fashion-mnist",
        "vit-seed",
        "cnn-seed",
        rows=2000,
        epochs=8,
        patch=7,
        patches=(4, 7, 14),
        stride=4,
        sweep=((500, 10), (2000, 8), (8000, 2), (None, 1)),
        lrs=(1e-3, 3e-3, 1e-2),
        test_protocol=(4000, 15),
    ),
    "digits": Profile(
        "digits",
        "vit-digits",
        "cnn-digits",
        rows=600,
        epochs=15,
        patch=2,
        patches=(1, 2, 4),
        stride=1,
        sweep=((150, 30), (300, 20), (600, 15), (None, 10)),
        lrs=(1e-3, 3e-3, 1e-2),
        test_protocol=None,
    ),
}
PUBLISHED_TEST_ACC = 0.7640  # the page's ViT on the full Fashion-MNIST test split


@dataclass(frozen=True)
class Effect:
    """One measured effect of a claim: the ViT's ``metric`` at ``axis`` = ``value`` minus at ``baseline``
    (``seconds``: the log of their ratio), seed-paired within each setting of the grid's other axes, expected
    to have ``sign``; ``words`` name what is measured. ``axis="cnn"``: the ViT minus the CNN of its cell."""

    axis: str
    value: Any
    baseline: Any
    metric: str
    sign: int
    words: str


@dataclass(frozen=True)
class Pitfall:
    """A claim of the texts and how it is measured: ``grids`` (CompareConfig fields over the base, one
    study each), its ``effects``; or ``published`` (a point claim on ``metric``) or ``count`` (an exact
    token count)."""

    key: str
    claim: str
    source: str
    grids: tuple[dict[str, Any], ...]
    effects: tuple[Effect, ...] = ()
    cnn: bool = False  # whether its cells need their CNN trained
    published: float | None = None
    count: bool = False
    trend: str = ""  # a second claim: the effect moves against its sign from the first grid to the last


def pitfalls_for(profile: Profile) -> list[Pitfall]:
    """The preset's pitfalls on ``profile``'s dataset."""
    p = profile
    out = [
        Pitfall(
            "positions",
            "Without positions the model cannot tell a shuffled image from the original (attention is "
            "permutation-equivariant), and it needs them",
            "all four texts",
            ({"position": ["abs", "sincos", "rope", "none"], "permute": True},),
            (
                Effect("position", "none", "abs", "permuted_agreement", 1, "agreement with shuffled patches"),
                Effect("position", "none", "abs", "best_val_acc", -1, "best validation accuracy"),
            ),
        ),
        Pitfall(
            "post-norm",
            "Post-norm without warmup diverges at ordinary learning rates; pre-norm is the robust default",
            "the Keras page; the chapter",
            ({"block": ["prenorm", "postnorm"], "lr": list(p.lrs), "warmup": [0.0, 2.0]},),
            (Effect("block", "postnorm", "prenorm", "best_val_acc", -1, "best validation accuracy"),),
        ),
        Pitfall(
            "batchnorm",
            "BatchNorm in a transformer block is a pitfall: per-token LayerNorm is why the block trains "
            "without batch-statistics trouble",
            "the Keras page",
            ({"norm": ["layernorm", "batchnorm"]},),
            (Effect("norm", "batchnorm", "layernorm", "best_val_acc", -1, "best validation accuracy"),),
        ),
        Pitfall(
            "causal",
            "A causal mask on patches hides a 'future' that does not exist (a classifier ViT needs none)",
            "the course notes",
            ({"mask": ["none", "causal"], "pool": ["mean", "token"]},),
            (Effect("mask", "causal", "none", "best_val_acc", -1, "best validation accuracy"),),
        ),
        Pitfall(
            "patch-cost",
            "Shrinking the patch to 'see more detail' multiplies the cost: halving it quadruples the tokens",
            "the Keras page; the course notes",
            ({"patches": list(p.patches)},),
            (
                Effect("patch", min(p.patches), p.patch, "seconds", 1, "training seconds"),
                Effect("patch", max(p.patches), p.patch, "seconds", -1, "training seconds"),
            ),
        ),
        Pitfall(
            "patch-detail",
            "Small patches preserve fine detail; large ones make each token summarise more of the image",
            "the NumPy chapter; the course notes",
            ({"patches": list(p.patches)},),
            (
                Effect("patch", min(p.patches), p.patch, "best_val_acc", 1, "best validation accuracy"),
                Effect("patch", max(p.patches), p.patch, "best_val_acc", -1, "best validation accuracy"),
            ),
        ),
        Pitfall(
            "overlap",
            "Counting overlapping windows as H W / P^2 miscounts the tokens (ViT patches tile)",
            "the course notes",
            ({"stride": ["patch", str(p.stride)]},),
            (Effect("stride", str(p.stride), "patch", "best_val_acc", 1, "best validation accuracy"),),
            count=True,
        ),
        Pitfall(
            "augmentation",
            "Augmentation hurt on this data (centred, pose-normalised images)",
            "the Keras page",
            ({"augment": ["none", "light", "strong"]},),
            (
                Effect("augment", "light", "none", "best_val_acc", -1, "best validation accuracy"),
                Effect("augment", "strong", "none", "best_val_acc", -1, "best validation accuracy"),
            ),
        ),
        Pitfall(
            "huge-data",
            "'ViTs need huge data', quoted as a law: a CNN of the same size leads on small data",
            "the course notes; the chapter (the Keras page calls it conditional)",
            tuple({"rows": [rows], "epochs": epochs, "cnns": ["matched"]} for rows, epochs in p.sweep),
            (Effect("cnn", "vit", "cnn", "best_val_acc", -1, "best validation accuracy, ViT − CNN"),),
            cnn=True,
            trend="… and the ViT catches up as the rows grow",
        ),
    ]
    if p.test_protocol is not None:
        rows, epochs = p.test_protocol
        out.append(
            Pitfall(
                "test-accuracy",
                f"The page's ViT scores {PUBLISHED_TEST_ACC:.4f} on the full test split ({rows:,} rows, "
                f"{epochs} epochs)",
                "the Keras page",
                ({"rows": [rows], "epochs": epochs},),
                published=PUBLISHED_TEST_ACC,
            )
        )
    return out


# -- planning ----------------------------------------------------------------------------------------


@dataclass
class Study:
    """One grid of a pitfall: its config, plan and (after the runs) records by key."""

    pitfall: str
    config: CompareConfig
    plan: Plan
    records: dict[str, RunRecord] = field(default_factory=dict)


def pick_profile(dataset: str | None, data_dir: str | None) -> tuple[Profile, str]:
    """The profile to run and why: ``dataset`` (``fashion-mnist`` or ``digits``), or Fashion-MNIST when its
    files are found, else digits."""
    if dataset is not None:
        if dataset not in PROFILES:
            raise ConfigError(f"--preset pitfalls runs on {' or '.join(PROFILES)}, got --dataset {dataset}")
        return PROFILES[dataset], "as asked"
    try:
        locate_dataset("fashion-mnist", data_dir)
    except DataError:
        return PROFILES["digits"], "Fashion-MNIST was not found (apt-get install dataset-fashion-mnist)"
    return PROFILES["fashion-mnist"], "found"


def base_fields(profile: Profile, seeds: int, data_dir: str | None, device: str) -> dict[str, Any]:
    """The CompareConfig fields every grid starts from."""
    return {
        "dataset": profile.dataset,
        "data_dir": data_dir,
        "vit": profile.vit,
        "cnn": profile.cnn,
        "recipe": "plain",
        "normalization": "unit",
        "seeds": seeds,
        "rows": [profile.rows],
        "epochs": profile.epochs,
        "patches": [profile.patch],
        "augment": ["none"],
        "device": device,
    }


def plan_studies(
    profile: Profile, seeds: int = SEEDS, data_dir: str | None = None, device: str = "auto"
) -> list[Study]:
    """Every pitfall's grids as planned studies; a grid whose claim needs no CNN keeps its ViT runs only."""
    if seeds < 2:
        raise ConfigError(
            f"--preset pitfalls decides each verdict by the seed spread: give --seeds 2 or more, got {seeds}"
        )
    base = base_fields(profile, seeds, data_dir, device)
    shape = data_shape(load_splits(CompareConfig(**base), 0, profile.rows))
    studies = []
    for pitfall in pitfalls_for(profile):
        for grid in pitfall.grids:
            config = CompareConfig(**{**base, "name": f"{NAME}-{pitfall.key}", **grid})
            plan = plan_compare(config, shape)
            if not pitfall.cnn:
                plan = Plan(plan.axes, plan.cells, [r for r in plan.runs if r.kind == "vit"], plan.skipped)
            studies.append(Study(pitfall.key, config, plan))
    return studies


def execution_groups(studies: Sequence[Study]) -> list[tuple[CompareConfig, Plan, list[int]]]:
    """The studies grouped by what their runs share (everything but the grid), each group's plans merged
    into one (runs by key; a key stands for one training), so that a training several grids need runs
    once: ``(config, merged plan, the studies' indices)``."""
    grid_fields = {"name", "rows", "patches", "augment", "seeds", "cnns", "permute", *VARIANTS}
    groups: dict[str, tuple[CompareConfig, dict[str, Any], list[int]]] = {}
    for index, study in enumerate(studies):
        shared = {k: v for k, v in asdict(study.config).items() if k not in grid_fields}
        config, runs, members = groups.setdefault(repr(sorted(shared.items())), (study.config, {}, []))
        for run in study.plan.runs:
            known = runs.setdefault(run.key, run)
            if (known.model, known.overrides, known.train) != (run.model, run.overrides, run.train):
                raise ValueError(f"two grids plan run {run.key} differently: a key must stand for one training")
        members.append(index)
    return [
        (_permuting(config, [studies[i] for i in members]), Plan([], [], list(runs.values())), members)
        for config, runs, members in groups.values()
    ]


def _permuting(config: CompareConfig, members: Sequence[Study]) -> CompareConfig:
    """``config`` scoring the permutation probe when any of its group's grids asks for it."""
    wanted = any(study.config.permute for study in members)
    return CompareConfig(**{**asdict(config), "permute": wanted}) if wanted != config.permute else config


# -- verdicts ----------------------------------------------------------------------------------------


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


def _value_words(axis: str, value: Any) -> str:
    if axis == "patch":
        return f"patch {value}"
    if axis == "augment":
        return augment_words(value)
    if axis == "rows":
        return "the whole pool" if value is None else f"{value:,} rows"
    return variant_words(axis, value)


def _condition(axes: dict[str, Any], varying: set[str]) -> str:
    return ", ".join(_value_words(k, v) for k, v in axes.items() if k in varying) or "the base cell"


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
            sides = f"{_value_words(effect.axis, effect.value)} − {_value_words(effect.axis, effect.baseline)}"
            measured = effect.words if effect.axis == "cnn" else f"{effect.words}: {sides}"
            out.append(Verdict(pitfall.key, pitfall.claim, pitfall.source, measured, parts, overall(parts)))
            if pitfall.trend and len(parts) > 1:
                trend = [trend_part(parts[0], parts[-1], -effect.sign)]
                words = f"{effect.words}, its change from the fewest rows to the most"
                out.append(Verdict(pitfall.key, pitfall.trend, pitfall.source, words, trend, overall(trend)))
    return out


# -- running -----------------------------------------------------------------------------------------


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


def run_pitfalls(
    out_dir: str | Path | None,
    *,
    seeds: int = SEEDS,
    dataset: str | None = None,
    data_dir: str | None = None,
    device: str = "auto",
    executor: Executor | None = None,
    progress: Any = None,
    overwrite: bool = False,
) -> PitfallsResult:
    """Plan every pitfall's grids, run them together on ``executor`` and, with ``out_dir``, write
    ``results.json`` and ``report.md`` there (a study folder: an existing one is refused unless
    ``overwrite``)."""
    start, cpu_start = time.perf_counter(), time.process_time()
    profile, reason = pick_profile(dataset, data_dir)
    studies = plan_studies(profile, seeds, data_dir, device)
    settings = {"preset": NAME, "dataset": profile.dataset, "seeds": seeds, "device": device}
    if out_dir is None:
        return _run(studies, profile, reason, executor, progress, start, cpu_start)
    with open_study(out_dir, settings, overwrite):
        result = _run(studies, profile, reason, executor, progress, start, cpu_start)
        result.files = write_pitfalls(result, out_dir)
    return result


def _run(
    studies: list[Study],
    profile: Profile,
    reason: str,
    executor: Executor | None,
    progress: Any,
    start: float,
    cpu_start: float,
) -> PitfallsResult:
    executor = executor or LocalExecutor(jobs=1, threads=None)
    groups = execution_groups(studies)
    outcomes, task_cpu = execute_many([(config, plan) for config, plan, _ in groups], executor, progress)
    for (_, _, members), found in zip(groups, outcomes):
        for index in members:
            studies[index].records = {run.key: found[run.key].record for run in studies[index].plan.runs}
    shape = data_shape(load_splits(studies[0].config, 0, profile.rows))
    found_verdicts = verdicts(studies, profile, shape)
    cpu = task_cpu + time.process_time() - cpu_start
    return PitfallsResult(
        profile, reason, studies, found_verdicts, time.perf_counter() - start, cpu, executor.describe()
    )


# -- the report --------------------------------------------------------------------------------------


def _signed(value: float) -> str:
    return f"{value:+.4f}".replace("-", "−")


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
        text = f"{_signed(part.mean)}{band}, {seeds}: {_number(part.value_mean)} against {_number(part.baseline_mean)}"
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
    rows = ", ".join(_value_words("rows", r) for r in cfg.rows)
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
        "environment": {
            "vitlab": __version__,
            "torch": torch.__version__,
            "python": platform.python_version(),
            **result.execution,
        },
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
