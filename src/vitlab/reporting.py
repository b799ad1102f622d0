"""The plain pieces every report uses, on the ground floor so that any floor may render one: a Markdown
table, a plain-text table of aligned columns, and the verdict of seed-paired differences (reproduced / not
reproduced / inconclusive, by two standard errors)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table's lines: the header, the rule, one line per row of cells."""
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(" --- " for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in body),
    ]


def aligned_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of a plain-text table: ``header`` and ``rows``, every cell right-aligned, each column as wide as
    its widest cell, columns two spaces apart."""
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in [header, *rows]]


def judge(differences: Sequence[float], sign: int) -> tuple[float, float | None, str]:
    """Mean, 2-standard-error band (``None`` with one value) and verdict of paired ``differences``
    for a claim that expects their ``sign``."""
    mean = statistics.fmean(differences)
    if len(differences) < 2:
        return mean, None, "inconclusive"
    band = 2 * statistics.stdev(differences) / math.sqrt(len(differences))
    verdict = "reproduced" if sign * mean > band else "not reproduced" if sign * mean < -band else "inconclusive"
    return mean, band, verdict
