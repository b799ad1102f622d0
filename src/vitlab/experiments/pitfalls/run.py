"""``run_pitfalls``: every pitfall's grids planned, run together on one executor, judged and written."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..execution import execute_many
from ..executors import Executor, LocalExecutor
from ..files import open_study
from ..plan import data_shape, load_splits
from .catalogue import NAME, SEEDS, Profile
from .report import write_pitfalls
from .studies import Study, execution_groups, pick_profile, plan_studies
from .verdicts import PitfallsResult, verdicts


@dataclass(frozen=True)
class PitfallsSettings:
    """What a pitfalls run studies: ``seeds`` per grid cell, on ``dataset`` (None: the profile's own, see
    :func:`~vitlab.experiments.pitfalls.studies.pick_profile`) read from ``data_dir``, trained on ``device``."""

    seeds: int = SEEDS
    dataset: str | None = None
    data_dir: str | None = None
    device: str = "auto"


def run_pitfalls(
    out_dir: str | Path | None,
    settings: PitfallsSettings = PitfallsSettings(),
    *,
    executor: Executor | None = None,
    progress: Any = None,
    overwrite: bool = False,
) -> PitfallsResult:
    """Plan every pitfall's grids, run them together on ``executor`` and, with ``out_dir``, write
    ``results.json`` and ``report.md`` there (a study folder: an existing one is refused unless
    ``overwrite``)."""
    seeds, dataset, data_dir, device = settings.seeds, settings.dataset, settings.data_dir, settings.device
    start, cpu_start = time.perf_counter(), time.process_time()
    profile, reason = pick_profile(dataset, data_dir)
    studies = plan_studies(profile, seeds, data_dir, device)
    recorded = {"preset": NAME, "dataset": profile.dataset, "seeds": seeds, "device": device}
    if out_dir is None:
        return _run(studies, profile, reason, executor, progress, start, cpu_start)
    with open_study(out_dir, recorded, overwrite):
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
