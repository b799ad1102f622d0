"""Experiments: ``compare`` (a ViT against a CNN of the same size, over a grid of dataset sizes,
patch sizes, augmentation and seeds), in pieces:

- ``axes``: the axis vocabulary (variants, their defaults and choices, every value in words);
  ``config``: :class:`CompareConfig`; ``records``: planned runs, cells, plans, run records, results.
- ``variants``: how axis values become the ViT (overrides, skip reasons); ``plan``: the grid expanded
  (:func:`plan_compare`); ``scoring``: a trained run's record.
- ``execution``: groups of runs on an executor (``executors``: local processes or Ray); ``training``:
  the one door to the training code; ``compare``: :func:`run_compare`.
- the report: ``aggregates`` (over seeds), ``tables``, ``conclusions`` (sentences), ``sections``,
  ``figures``, ``textbook`` and ``textbook_report`` (the textbook's study and its verdicts), ``report``
  (results.json, report.md).
- ``pitfalls``: the texts' pitfalls, each a small grid with a verdict; ``segment``: dense heads side by
  side by patch size; ``command``: ``vitlab compare`` as library functions.
"""

from .aggregates import Aggregate, Lead, aggregate, compute_leads
from .axes import Axis
from .compare import run_compare
from .conclusions import conclusions, describe_cell, lead_sentence
from .config import CompareConfig
from .execution import execute
from .executors import EXECUTORS, LocalExecutor, RayExecutor, make_executor, usable_cores
from .plan import data_shape, grid_axes, plan_compare
from .records import Cell, CompareResult, Plan, RunPlan, RunRecord
from .report import write_report
from .textbook import CLAIMS, PUBLISHED
from .textbook_report import claim_verdicts

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
