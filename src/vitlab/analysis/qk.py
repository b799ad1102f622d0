"""Why attention divides its scores by ``sqrt(d_k)``, measured: the variance of ``q . k`` and the sharpness
of the softmax over it, with and without the scale, and the report ``vitlab shapes --qk-variance`` prints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from ..errors import ConfigError
from ..reporting import aligned_table

QK_DIMS = (4, 16, 64, 256)  # qk_variance_report: the head widths d_k it measures
QK_SAMPLES = 10_000
QK_KEYS = 64  # qk_variance_report: the keys one query's softmax runs over


def qk_variance(d_k: int, samples: int = 10_000, seed: int = 0) -> tuple[float, float]:
    """Sample variance of ``q . k`` over ``samples`` pairs of standard-normal ``q, k`` of size ``d_k``,
    before and after dividing by ``sqrt(d_k)``. A sum of ``d_k`` independent unit-variance products has
    variance ``d_k``; the scaled score has variance 1, whatever ``d_k``."""
    if d_k < 1 or samples < 2:
        raise ConfigError(f"d_k={d_k}, samples={samples}: a variance needs d_k >= 1 and at least 2 samples")
    generator = torch.Generator().manual_seed(seed)
    q, k = torch.randn(2, samples, d_k, generator=generator, dtype=torch.float64)  # (samples, d_k) each
    scores = (q * k).sum(-1)  # (samples,)
    return scores.var().item(), (scores / math.sqrt(d_k)).var().item()


def softmax_peak(d_k: int, keys: int = 64, samples: int = 1_000, seed: int = 0) -> tuple[float, float]:
    """Mean largest softmax weight of one query over ``keys`` keys, for standard-normal ``q, k`` of
    size ``d_k``, with raw scores ``q . k`` and with scaled scores ``q . k / sqrt(d_k)``. Raw scores
    spread as ``sqrt(d_k)``, so their softmax saturates towards one-hot as ``d_k`` grows; scaled ones
    keep a ``d_k``-free spread (``1 / keys`` would be uniform)."""
    if d_k < 1 or keys < 2 or samples < 1:
        raise ConfigError(f"d_k={d_k}, keys={keys}, samples={samples}: need d_k >= 1, at least 2 keys and 1 sample")
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(samples, 1, d_k, generator=generator, dtype=torch.float64)  # (samples, 1, d_k)
    k = torch.randn(samples, keys, d_k, generator=generator, dtype=torch.float64)  # (samples, keys, d_k)
    scores = (q * k).sum(-1)  # (samples, keys)
    raw = scores.softmax(-1).amax(-1).mean().item()
    scaled = (scores / math.sqrt(d_k)).softmax(-1).amax(-1).mean().item()
    return raw, scaled


def qk_variance_figure(
    variances: dict[int, tuple[float, float]], peaks: dict[int, tuple[float, float]], keys: int
) -> Any:
    """A matplotlib figure of :func:`qk_variance` and :func:`softmax_peak` against ``d_k``: the score
    variance (log-log; raw grows with slope 1, scaled stays at 1) and the largest softmax weight over
    ``keys`` keys (raw saturates towards 1, scaled stays put)."""
    from matplotlib.figure import Figure

    dims = sorted(variances)
    fig = Figure(figsize=(9, 3.6), constrained_layout=True)
    spread, peak = fig.subplots(1, 2)
    spread.loglog(dims, [variances[d][0] for d in dims], marker="o", label="q . k")
    spread.loglog(dims, [variances[d][1] for d in dims], marker="o", label="q . k / sqrt(d_k)")
    spread.loglog(dims, dims, color="grey", linestyle="--", linewidth=1, label="theory: d_k")
    spread.set(xlabel="d_k (head width)", ylabel="variance of the score", title="score variance")
    peak.semilogx(dims, [peaks[d][0] for d in dims], marker="o", label="softmax(q . k)")
    peak.semilogx(dims, [peaks[d][1] for d in dims], marker="o", label="softmax(q . k / sqrt(d_k))")
    peak.axhline(1 / keys, color="grey", linestyle="--", linewidth=1, label=f"uniform 1/{keys}")
    peak.set(
        xlabel="d_k (head width)",
        ylabel="largest weight (mean)",
        ylim=(0, 1.05),
        title=f"sharpness of one query over {keys} keys",
    )
    for ax in (spread, peak):
        ax.legend(fontsize=8)
    return fig


def qk_variance_report(plot: str | Path | None = None) -> str:
    """The variance of ``q . k`` for standard-normal ``q, k``, measured beside the theory, and the
    largest softmax weight over :data:`QK_KEYS` keys with and without ``1/sqrt(d_k)``, per ``d_k`` of
    :data:`QK_DIMS`, as text; ``plot``: also draw both against ``d_k`` into this PNG."""
    measured = {d: qk_variance(d, QK_SAMPLES) for d in QK_DIMS}
    peaks = {d: softmax_peak(d, QK_KEYS) for d in QK_DIMS}
    lines = [
        f"q . k for standard-normal q, k ({QK_SAMPLES:,} seeded samples per d_k): the variance grows as d_k;\n"
        "dividing by sqrt(d_k) brings it back to 1, so the softmax's sharpness does not depend on the head width\n"
        f"(max weight: the largest softmax weight of one query over {QK_KEYS} keys, mean of 1,000 queries)",
        *aligned_table(
            ("d_k", "Var(q.k)", "theory", "Var(q.k / sqrt(d_k))", "theory", "max weight", "scaled max weight"),
            [
                (str(d), f"{raw:.2f}", str(d), f"{scaled:.3f}", "1", f"{peaks[d][0]:.3f}", f"{peaks[d][1]:.3f}")
                for d, (raw, scaled) in measured.items()
            ],
        ),
    ]
    if plot:
        qk_variance_figure(measured, peaks, QK_KEYS).savefig(plot, dpi=120)
        lines.append(f"wrote {plot}")
    return "\n".join(lines)
