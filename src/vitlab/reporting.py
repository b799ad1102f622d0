"""The plain pieces every report uses, on the ground floor so that any floor may render one: a Markdown
table, and the verdict of seed-paired differences (reproduced / not reproduced / inconclusive, by two
standard errors)."""

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


def judge(differences: Sequence[float], sign: int) -> tuple[float, float | None, str]:
    """Mean, 2-standard-error band (``None`` with one value) and verdict of paired ``differences``
    for a claim that expects their ``sign``."""
    mean = statistics.fmean(differences)
    if len(differences) < 2:
        return mean, None, "inconclusive"
    band = 2 * statistics.stdev(differences) / math.sqrt(len(differences))
    verdict = "reproduced" if sign * mean > band else "not reproduced" if sign * mean < -band else "inconclusive"
    return mean, band, verdict
