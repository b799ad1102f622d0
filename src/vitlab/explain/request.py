"""One explanation request, as ``vitlab explain`` makes it: one example explained (the default), an
``audit`` of what the maps are worth, or ``probes`` of the model itself.

:meth:`ExplainRequest.check` refuses what makes no sense before any work (a :class:`ConfigError` naming the
option); :func:`explain_request` loads the checkpoint, runs the
request and returns an :class:`Explained`: the result and the text a person reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data.options import DataOptions
from ..errors import ConfigError
from ..runs import Loaded
from .audit import AuditResult
from .input_probes import PROBES
from .maps import Query
from .report import Retrainer, audit_checkpoint, check_explain_options, explain_checkpoint, probe_checkpoint

SAMPLES = {"audit": 100, "probe": 1000}  # default images per mode


@dataclass(frozen=True)
class ExplainRequest:
    """What to explain and where to write it (the fields are ``vitlab explain``'s options).

    ``probes`` (names of :data:`~vitlab.explain.input_probes.PROBES`) runs the probes, else ``audit`` the audit,
    else one example (image ``index`` of ``split``) is explained. ``method`` None means every map that
    applies; ``samples`` None the mode's default (:data:`SAMPLES`).
    """

    out: str | Path = "explain"
    dataset: str | None = None
    data_dir: str | Path | None = None
    split: str = "val"
    method: str | None = None
    index: int = 0
    query: Query | None = None
    patch_size: int | None = None
    textbook: bool = False
    audit: bool = False
    probes: Sequence[str] | None = None
    samples: int | None = None
    steps: int | None = None
    sanity_epochs: int = 5
    threshold: float = 0.5
    seed: int = 0
    device: str = "auto"
    overwrite: bool = False
    options: DataOptions | None = None

    def sample_count(self) -> int:
        """``samples``, else the mode's default."""
        return SAMPLES["probe" if self.probes else "audit"] if self.samples is None else self.samples

    def check(self) -> None:
        """Refuse a mode or option that makes no sense (:class:`ConfigError` naming the option)."""
        if self.probes is not None:
            if self.audit:
                raise ConfigError("--probe and --audit are two separate measurements: run them one at a time")
            if not self.probes or any(name not in PROBES for name in self.probes):
                raise ConfigError(
                    f"--probe takes {', '.join(PROBES)} or all, comma-separated; got {','.join(self.probes)!r}"
                )
        check_explain_options(
            index=self.index,
            patch_size=self.patch_size,
            samples=self.sample_count(),
            steps=self.steps,
            sanity_epochs=self.sanity_epochs,
            seed=self.seed,
            threshold=self.threshold,
        )


@dataclass
class Explained:
    """A request's result (the example's or the probes' report, or the :class:`AuditResult`) and its
    summary for a person, ending in the files written."""

    result: dict[str, Any] | AuditResult
    text: str


def explain_request(
    request: ExplainRequest, load: Callable[[], Loaded], retrainer: Retrainer | None = None
) -> Explained:
    """Check ``request`` (:meth:`ExplainRequest.check`), then ``load()`` the checkpoint and run it; the
    audit's permuted-label copy is trained by ``retrainer`` (see
    :func:`~vitlab.explain.report.audit_checkpoint`)."""
    request.check()
    loaded = load()  # options first: a bad one is refused before loading
    common: dict[str, Any] = dict(
        dataset=request.dataset,
        data_dir=request.data_dir,
        split=request.split,
        patch_size=request.patch_size,
        device=request.device,
        overwrite=request.overwrite,
        options=request.options,
    )
    if request.probes:
        probed = probe_checkpoint(
            loaded, request.out, request.probes, samples=request.sample_count(), seed=request.seed, **common
        )
        return Explained(probed, Path(probed["files"][1]).read_text() + "wrote " + ", ".join(probed["files"]) + "\n")
    common["methods"] = None if request.method is None else (request.method,)
    if request.audit:
        result = audit_checkpoint(
            loaded,
            request.out,
            samples=request.sample_count(),
            seed=request.seed,
            steps=request.steps,
            sanity_epochs=request.sanity_epochs,
            threshold=request.threshold,
            retrainer=retrainer,
            **common,
        )
        took = f"audit took {result.seconds:.1f}s; wrote {request.out}/audit.json, audit.md and figures\n"
        return Explained(result, result.markdown() + took)
    report = explain_checkpoint(
        loaded, request.out, index=request.index, query=request.query, textbook=request.textbook, **common
    )
    return Explained(report, example_summary(report))


def example_summary(report: dict[str, Any]) -> str:
    """The lines a person reads about one explained example (:func:`~vitlab.explain.report.explain_checkpoint`'s
    report): the prediction, each map's top patch, the last layer's heads, the files written."""
    predicted = (
        "an encoder, no prediction"
        if report["prediction"] is None
        else f"{report['label']} → {report['prediction']} (confidence {report['confidence']:.4f})"
    )
    lines = [f"{report['model']} on {report['dataset']} {report['split']} #{report['index']}: {predicted}"]
    for method, summary in report["maps"].items():
        lines.append(f"  {method:<11} top patch (row, col) {tuple(summary['top_patch'])}  max {summary['max']:.4f}")
    if "heads" in report:
        heads = report["heads"]
        lines.append(
            "  last-layer heads, most-attended key's weight (max): " + ", ".join(f"{s:.4f}" for s in heads["max"][-1])
        )
        lines.append("  last-layer head spreads (max − min): " + ", ".join(f"{s:.4f}" for s in heads["spread"][-1]))
    lines.append("wrote " + ", ".join(report["files"]))
    return "\n".join(lines) + "\n"
