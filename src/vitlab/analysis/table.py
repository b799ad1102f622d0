"""The plain text table the analysis reports print: right-aligned columns, each as wide as its widest cell."""

from __future__ import annotations

from collections.abc import Sequence


def aligned_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """The lines of ``header`` and ``rows``, every cell right-aligned, columns two spaces apart."""
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    return ["  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in [header, *rows]]
