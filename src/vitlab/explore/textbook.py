"""The texts' tables that ``vitlab shapes --qk-variance`` and ``vitlab cost`` print, for the Mechanics and
Cost pages: why scores are divided by ``sqrt(d_k)``, what a token costs, and how many token pairs a
convolution mixes against attention.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..analysis.cost import TEXTBOOK_PAIRS, cost_table, interactions
from ..analysis.qk import qk_variance, softmax_peak
from .images import RequestError

QK_DIMS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # head widths d_k measured
QK_SAMPLES = 4_000
QK_QUERIES = 200
MAX_KEYS = 1024


@lru_cache(maxsize=8)
def qk_scale_view(keys: int = 64) -> dict[str, Any]:
    """For every ``d_k`` of :data:`QK_DIMS`: the variance of ``q.k`` for standard-normal ``q, k`` before and
    after dividing by ``sqrt(d_k)`` (:func:`vitlab.analysis.qk.qk_variance`, theory ``d_k`` and 1), and the
    largest softmax weight of one query over ``keys`` keys with raw and with scaled scores
    (:func:`~vitlab.analysis.qk.softmax_peak`; ``1 / keys`` would be uniform)."""
    if isinstance(keys, bool) or not 2 <= keys <= MAX_KEYS:
        raise RequestError(f"keys must lie in [2, {MAX_KEYS}], got {keys}")
    variances = [qk_variance(d, QK_SAMPLES) for d in QK_DIMS]
    peaks = [softmax_peak(d, keys, QK_QUERIES) for d in QK_DIMS]
    return {
        "dims": list(QK_DIMS),
        "keys": keys,
        "samples": QK_SAMPLES,
        "queries": QK_QUERIES,
        "variance_raw": [raw for raw, _ in variances],
        "variance_scaled": [scaled for _, scaled in variances],
        "peak_raw": [raw for raw, _ in peaks],
        "peak_scaled": [scaled for _, scaled in peaks],
        "uniform": 1.0 / keys,
    }


def textbook_cost_view() -> dict[str, Any]:
    """The texts' token-cost table (:func:`vitlab.analysis.cost.cost_table` over their (image, patch) pairs:
    tokens, attention entries ``N^2`` and their ratio to the first row) and, for each pair, the token pairs
    one layer mixes: a 3x3 convolution's (exact, borders cut, and ``9N``) against attention's ``N^2``."""
    rows = cost_table(TEXTBOOK_PAIRS)
    pairs = [interactions(image, patch) for image, patch in TEXTBOOK_PAIRS]
    return {
        "cost": [
            {"image": r.image, "patch": r.patch, "tokens": r.tokens, "entries": r.entries, "ratio": r.ratio}
            for r in rows
        ],
        "pairs": [
            {
                "image": p.image,
                "patch": p.patch,
                "grid": f"{p.grid[0]} × {p.grid[1]}",
                "tokens": p.tokens,
                "conv3x3": p.conv3x3,
                "interior_9n": p.interior_9n,
                "attention": p.attention,
                "attention_per_conv": p.attention / p.conv3x3,
            }
            for p in pairs
        ],
    }
