"""One explanation request, as ``vitlab explain`` makes it: one example explained (the default), an
``audit`` of what the maps are worth, or ``probes`` of the model itself.

:meth:`ExplainRequest.check` refuses what makes no sense before any work (a :class:`ConfigError` naming the
option); :func:`explain_request` loads the checkpoint, runs the
request and returns an :class:`Explained`: the result and the text a person reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..runs import Loaded
from .audit import AuditResult
from .report import ExplainRequest, Retrainer, audit_checkpoint, explain_checkpoint, probe_checkpoint


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
    if request.probes:
        probed = probe_checkpoint(loaded, request)
        return Explained(probed, Path(probed["files"][1]).read_text() + "wrote " + ", ".join(probed["files"]) + "\n")
    if request.audit:
        result = audit_checkpoint(loaded, request, retrainer)
        took = f"audit took {result.seconds:.1f}s; wrote {request.out}/audit.json, audit.md and figures\n"
        return Explained(result, result.markdown() + took)
    report = explain_checkpoint(loaded, request)
    if "examples" in report:  # image files
        text = "".join(example_summary({"model": report["model"], **each}) for each in report["examples"])
        written = {f for each in report["examples"] for f in each["files"]}
        more = [f for f in report["files"] if f not in written]  # the textbook's figures
        return Explained(report, text + ("wrote " + ", ".join(more) + "\n" if more else ""))
    return Explained(report, example_summary(report))


def example_summary(report: dict[str, Any]) -> str:
    """The lines a person reads about one explained example (:func:`~vitlab.explain.report.explain_checkpoint`'s
    report, or one of its ``examples`` for image files): the prediction, each map's top patch, the last layer's
    heads, the files written."""
    label = "" if report["label"] is None else f"{report['label']} "
    predicted = (
        "an encoder, no prediction"
        if report["prediction"] is None
        else f"{label}→ {report['prediction']} (confidence {report['confidence']:.4f})"
    )
    where = report["image"] if "image" in report else f"{report['dataset']} {report['split']} #{report['index']}"
    lines = [f"{report['model']} on {where}: {predicted}"]
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
