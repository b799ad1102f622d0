"""Experiments: ``compare`` (a ViT against a CNN of the same size, over a grid of dataset sizes,
patch sizes, augmentation and seeds) and its ``report`` (results.json, report.md, figures)."""
from .compare import (Axis, Cell, CompareConfig, CompareResult, Plan, RunPlan, RunRecord, data_shape, grid_axes,
                      plan_compare, run_compare)
from .report import Aggregate, Lead, aggregate, compute_leads, conclusions, describe_cell, lead_sentence, write_report

__all__ = ["Aggregate", "Axis", "Cell", "CompareConfig", "CompareResult", "Lead", "Plan", "RunPlan", "RunRecord",
           "aggregate", "compute_leads", "conclusions", "data_shape", "describe_cell", "grid_axes", "lead_sentence",
           "plan_compare", "run_compare", "write_report"]
