"""The names of a run folder's files, in one place (see :mod:`vitlab.runs.rundir` for the layout)."""

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
# Kinds of run that can continue from their last state (trainings); studies and evaluations cannot.
RESUMABLE = ("classify", "mae", "dino", "segment", "detect", "clip", "promptable")
EVALUATION = "metrics.json"  # what `vitlab evaluate --out` writes
# Files that mark a folder written by vitlab before run.json existed.
LEGACY_MARKERS = (CONFIG, METRICS, SUMMARY, RESULTS, EVALUATION, WEIGHTS, BEST, LAST)
