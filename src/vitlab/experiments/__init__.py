"""Experiments: ``compare`` (a ViT against a CNN of the same size, over a grid of dataset sizes,
patch sizes, augmentation and seeds), where its runs execute (``executors``: local processes or
Ray), the textbook's study (``textbook``) and its ``report`` (results.json, report.md, figures)."""

from .compare import (
    Axis,
    Cell,
    CompareConfig,
    CompareResult,
    Plan,
    RunPlan,
    RunRecord,
    data_shape,
    execute,
    grid_axes,
    plan_compare,
    run_compare,
)
from .executors import EXECUTORS, LocalExecutor, RayExecutor, make_executor, usable_cores
from .report import Aggregate, Lead, aggregate, compute_leads, conclusions, describe_cell, lead_sentence, write_report
from .textbook import CLAIMS, PUBLISHED, claim_verdicts

__all__ = [
    "Aggregate",
    "Axis",
    "CLAIMS",
    "Cell",
    "CompareConfig",
    "CompareResult",
    "EXECUTORS",
    "Lead",
    "LocalExecutor",
    "PUBLISHED",
    "Plan",
    "RayExecutor",
    "RunPlan",
    "RunRecord",
    "aggregate",
    "claim_verdicts",
    "compute_leads",
    "conclusions",
    "data_shape",
    "describe_cell",
    "execute",
    "grid_axes",
    "lead_sentence",
    "make_executor",
    "plan_compare",
    "run_compare",
    "usable_cores",
    "write_report",
]
