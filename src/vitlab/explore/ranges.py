"""The check every explorer view applies to a number a request sets: it lies in the view's range.

A number outside it (NaN included) is refused with :class:`~vitlab.explore.images.RequestError` (400)
naming the parameter and the range, before any work is done.
"""

from __future__ import annotations

import math

from .images import RequestError


def check_range(name: str, value: float, low: float, high: float) -> None:
    """Raise :class:`RequestError` unless ``low <= value <= high`` (a NaN never is)."""
    if not (low <= value <= high) or math.isnan(value):
        raise RequestError(f"{name} must lie in [{low}, {high}], got {value}")
