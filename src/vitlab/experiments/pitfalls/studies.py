"""The pitfalls' grids as planned studies (:func:`plan_studies`), grouped so that a training several
grids need runs once (:func:`execution_groups`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ...data.registry import locate_dataset
from ...errors import ConfigError, DataError
from ..axes import VARIANTS
from ..config import CompareConfig
from ..plan import data_shape, load_splits, plan_compare
from ..records import Plan, RunRecord
from .catalogue import NAME, PROFILES, SEEDS, Profile, pitfalls_for


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
