"""The names of a run folder's files, in one place (see :mod:`vitlab.runs.rundir` for the layout).

:func:`names` says whether a path inside a run folder is one vitlab's layout names: the only files
``--overwrite`` may delete from a folder that vitlab's marker (:data:`MARKER`) proves is a vitlab run,
and the only files a folder written before the marker existed may hold to count as a vitlab run.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

WEIGHTS = "model.safetensors"
RUN = "run.json"
CONFIG = "config.json"
METRICS = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
SUMMARY = "summary.json"
RESULTS = "results.json"
REPORT = "report.md"
STATE = "state.pt"
LOCK = ".lock"
BEST, LAST = "best", "last"
ATTENTION = "attention"  # `vitlab compare`'s attention figures
MODELS = "models"  # `vitlab compare`'s trained models, one checkpoint per run
EVALUATION = "metrics.json"  # what `vitlab evaluate --out` writes
# Files that mark a folder written by vitlab before run.json existed.
LEGACY_MARKERS = (CONFIG, METRICS, SUMMARY, RESULTS, EVALUATION, WEIGHTS, BEST, LAST)

# -- ownership -------------------------------------------------------------------------------------

MARKER = ".vitlab-run"  # written first in every run folder: {"run_id", "kind", ...}; proves vitlab made it
EPOCH = ".vitlab-epoch.json"  # the last committed epoch: its number and the SHA-256 of each file of the set
TEMP_PREFIX = ".vitlab-"  # every temporary file vitlab writes starts so: `.vitlab-RUNID-NAME.XXXX.tmp` in a run
TEMP_SUFFIX = ".tmp"
STAGE_PREFIX = ".vitlab-stage-"  # `.vitlab-stage-RUNID/`: an epoch's files before they are committed
RUN_ID = re.compile(r"[0-9a-f]{16}")

# The files of the one consistent set a resume relies on (written together, see RunDir.commit).
CHECKPOINT_SET = (f"{LAST}/{STATE}", f"{LAST}/{WEIGHTS}", f"{BEST}/{WEIGHTS}", METRICS, METRICS_CSV)

# Every file vitlab writes into a run folder, by kind of writer: trainings, evaluations
# (metrics.json), explanations (explain.json, audit.json/.md), studies (results.json, report.md,
# heads.md), figures (*.png) and the checkpoints in best/ and last/.
TOP_FILES = frozenset(
    {
        MARKER,
        EPOCH,
        LOCK,
        RUN,
        CONFIG,
        METRICS,
        METRICS_CSV,
        SUMMARY,
        RESULTS,
        REPORT,
        EVALUATION,
        "explain.json",
        "audit.json",
        "audit.md",
        "heads.md",
    }
)
TOP_PATTERNS = ("*.png",)
FOLDERS = {BEST: (WEIGHTS,), LAST: (WEIGHTS, STATE), ATTENTION: ("*.png",), MODELS: ("*.safetensors",)}

# What `atomic_write` named its temporary files before they carried the vitlab prefix: `.NAME.XXXXXXXX.tmp`.
_LEGACY_TEMP = re.compile(r"\.(?P<name>.+)\.[a-z0-9_]{8}\.tmp")


def names(rel: str) -> bool:
    """Whether ``rel`` (a file's path inside a run folder, ``/``-separated) is a file of vitlab's layout."""
    parts = rel.split("/")
    if len(parts) == 1:
        return rel in TOP_FILES or any(fnmatchcase(rel, p) for p in TOP_PATTERNS)
    if len(parts) == 2 and parts[0] in FOLDERS:
        return any(fnmatchcase(parts[1], p) for p in FOLDERS[parts[0]])
    return False


def is_folder(rel: str) -> bool:
    """Whether ``rel`` is a sub-folder of vitlab's layout (``best``, ``last``, ``attention``)."""
    return rel in FOLDERS


def own_temp(rel: str, run_id: str) -> bool:
    """Whether ``rel`` is a temporary file of the run ``run_id``: in a layout place, named
    ``.vitlab-RUNID-...tmp``."""
    parent, _, name = rel.rpartition("/")
    return (
        (parent == "" or parent in FOLDERS)
        and name.startswith(f"{TEMP_PREFIX}{run_id}-")
        and name.endswith(TEMP_SUFFIX)
    )


def legacy_named(rel: str) -> bool:
    """Whether an earlier vitlab (before :data:`MARKER`) may have written ``rel``: a layout file, or
    the temporary file of one (``.NAME.XXXXXXXX.tmp`` beside it)."""
    if names(rel):
        return True
    parent, _, name = rel.rpartition("/")
    match = _LEGACY_TEMP.fullmatch(name)
    return match is not None and names(f"{parent}/{match['name']}" if parent else match["name"])
