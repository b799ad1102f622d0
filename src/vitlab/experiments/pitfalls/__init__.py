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

from .catalogue import NAME, PROFILES, PUBLISHED_TEST_ACC, SEEDS, Effect, Pitfall, Profile, pitfalls_for
from .report import render_pitfalls, verdict_table, write_pitfalls
from .run import PitfallsSettings, run_pitfalls
from .studies import Study, base_fields, execution_groups, pick_profile, plan_studies
from .verdicts import (
    Part,
    PitfallsResult,
    Verdict,
    count_parts,
    effect_parts,
    overall,
    point_parts,
    trend_part,
    verdicts,
)

__all__ = [
    "Effect",
    "NAME",
    "PROFILES",
    "PUBLISHED_TEST_ACC",
    "Part",
    "Pitfall",
    "PitfallsResult",
    "Profile",
    "SEEDS",
    "Study",
    "Verdict",
    "base_fields",
    "count_parts",
    "effect_parts",
    "execution_groups",
    "overall",
    "pick_profile",
    "pitfalls_for",
    "plan_studies",
    "point_parts",
    "render_pitfalls",
    "PitfallsSettings",
    "run_pitfalls",
    "trend_part",
    "verdict_table",
    "verdicts",
    "write_pitfalls",
]
