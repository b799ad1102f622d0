"""Test what an explanation map is worth: deletion / insertion curves and sanity checks.

- Deletion (insertion): set (reveal) the patches in the order a map ranks them, most important
  first, and track the probability of the class predicted on the intact image. A map that finds the
  evidence makes the deletion curve fall fast (low area) and the insertion curve rise fast (high
  area). Both are compared with a random order and with the occlusion map's order. The removed
  value is the baseline 0, the dataset mean after normalisation; insertion starts from an image
  that is all baseline. Areas are trapezoids over the fraction of patches, so they lie in [0, 1].
- Sanity checks (Adebayo et al. 2018): the maps are recomputed (for the same inputs and classes)
  after randomising the model's weights stage by stage from the head down (cascading
  randomisation: each tensor replaced by noise of its own mean and spread,
  :func:`~vitlab.explain.faithfulness.randomise_`),
  and for a copy trained on permuted labels. The Spearman rank correlation with the
  trained model's map is averaged over the samples. A map still correlated above ``threshold``
  with the model destroyed is flagged: it shows the input, not the model.

:func:`audit` returns an :class:`AuditResult`; :func:`write_audit` writes ``audit.json``,
``audit.md`` and the figures.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..data import DataSplits, ImageDataset
from ..engine import predict_logits
from ..errors import ConfigError
from ..runs import atomic_write, write_json
from .faithfulness import cascade_stages, curve_area, deletion_insertion, randomise_, ranking, spearman
from .maps import applicable_methods, compute_maps, head_attention, patch_layout

Retrain = Callable[[DataSplits, int], nn.Module]
"""The permuted-label check's copy: ``retrain(splits, epochs)`` returns a freshly initialised model of the
audited model's recipe trained ``epochs`` epochs on ``splits`` (their training labels permuted), in eval
mode, on the audited model's device (:func:`vitlab.tasks.classify.train_copy` for a classifier)."""

CASES = ("confident correct", "unsure correct", "confident wrong", "unsure wrong")


# -- the audit ----------------------------------------------------------------------------------------


@dataclass
class MethodAudit:
    """One map method's audit row. ``cascade`` holds the mean rank correlation after each cascade
    stage (``AuditResult.stages``); ``randomised_rho`` is its last value (every weight randomised)."""

    method: str
    deletion_auc: float
    insertion_auc: float
    randomised_rho: float | None = None
    cascade: list[float | None] = field(default_factory=list)
    permuted_rho: float | None = None
    key_patch_top1: float | None = None
    verdict: str = ""


@dataclass
class Case:
    """A highlighted prediction: its image ``(C, H, W)`` in [0, 1], maps ``(gh, gw)`` per method, and
    (for models with attention) the last layer's head spreads for the default query."""

    kind: str
    index: int
    label: int
    prediction: int
    confidence: float
    image: torch.Tensor
    maps: dict[str, torch.Tensor]
    head_spreads: list[float] | None = None


@dataclass
class AuditResult:
    """What :func:`audit` measured. ``random`` holds the random order's deletion / insertion areas;
    ``curves`` the mean curves per ordering (``"random"`` included)."""

    dataset: str
    split: str
    samples: list[int]
    accuracy: float
    rows: list[MethodAudit]
    random: dict[str, float]
    stages: list[str]
    curves: dict[str, dict[str, list[float]]]
    cases: list[Case]
    classes: list[str]
    patch_size: int
    threshold: float
    key_patch: int | None
    sanity_epochs: int | None
    seconds: float

    def row(self, method: str) -> MethodAudit:
        for row in self.rows:
            if row.method == method:
                return row
        raise ValueError(f"no audit row for {method!r}: the audit covered {[r.method for r in self.rows]}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (figures' arrays left out)."""
        return {
            "dataset": self.dataset,
            "split": self.split,
            "samples": len(self.samples),
            "sample_indices": self.samples,
            "accuracy": self.accuracy,
            "patch_size": self.patch_size,
            "threshold": self.threshold,
            "key_patch": self.key_patch,
            "sanity_epochs": self.sanity_epochs,
            "seconds": self.seconds,
            "methods": [_finite(asdict(r)) for r in self.rows],
            "random": self.random,
            "cascade_stages": self.stages,
            "curves": self.curves,
            "cases": [
                {
                    "kind": c.kind,
                    "index": c.index,
                    "label": self.classes[c.label],
                    "prediction": self.classes[c.prediction],
                    "confidence": c.confidence,
                    "head_spreads": c.head_spreads,
                }
                for c in self.cases
            ],
        }

    def markdown(self) -> str:
        """The audit table and the highlighted cases as Markdown."""
        key = self.key_patch is not None
        head = (
            [
                "method",
                "deletion AUC (lower is better)",
                "insertion AUC (higher is better)",
                "ρ weights randomised",
                "ρ labels permuted",
            ]
            + (["key patch first"] if key else [])
            + ["verdict"]
        )
        lines = [
            f"# Explanation audit: {self.dataset} {self.split}, {len(self.samples)} samples "
            f"(accuracy {self.accuracy:.4f})",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        for r in self.rows:
            cells = (
                [
                    r.method,
                    f"{r.deletion_auc:.4f}",
                    f"{r.insertion_auc:.4f}",
                    _fmt(r.randomised_rho),
                    _fmt(r.permuted_rho),
                ]
                + ([_fmt(r.key_patch_top1)] if key else [])
                + [r.verdict]
            )
            lines.append("| " + " | ".join(cells) + " |")
        lines.append(
            "| random order | "
            + f"{self.random['deletion_auc']:.4f} | {self.random['insertion_auc']:.4f} | "
            + " | ".join(["–"] * (len(head) - 3))
            + " |"
        )
        lines += [
            "",
            f"ρ: mean Spearman rank correlation with the trained model's map; a map with ρ ≥ "
            f"{self.threshold} after the weights are randomised or the labels permuted "
            f"{'(' + str(self.sanity_epochs) + ' epochs) ' if self.sanity_epochs else ''}does not "
            f"explain the model. Cascade stages, head first: {', '.join(self.stages)}.",
            "",
            "## Cases",
            "",
        ]
        for c in self.cases:
            spreads = (", head spreads " + ", ".join(f"{s:.4f}" for s in c.head_spreads)) if c.head_spreads else ""
            lines.append(
                f"- {c.kind}: #{c.index}, {self.classes[c.label]} → {self.classes[c.prediction]} "
                f"(confidence {c.confidence:.4f}){spreads}"
            )
        return "\n".join(lines) + "\n"


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.4f}"


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: ([None if v is None or math.isnan(v) else v for v in x] if isinstance(x, list) else x) for k, x in d.items()
    }


def _mean(values: torch.Tensor) -> float | None:
    value = float(values.nanmean()) if len(values) else float("nan")
    return None if math.isnan(value) else value


def permuted_labels(splits: DataSplits, seed: int) -> DataSplits:
    """``splits`` with the training labels shuffled (seeded), the validation split kept; no test."""
    train = splits.in_memory("train", "the audit's label-permutation test")
    g = torch.Generator().manual_seed(seed)
    labels = train.labels[torch.randperm(len(train), generator=g)]
    return DataSplits(
        splits.name,
        ImageDataset(train.images, labels, train.classes),
        splits.val,
        None,
        splits.mean,
        splits.std,
        splits.hflip_ok,
    )


@dataclass(frozen=True)
class AuditOptions:
    """What an :func:`audit` measures.

    Attributes:
        samples: seeded images of ``split`` audited.
        methods: the maps audited (None: every method that applies to the model).
        seed: draws the images, the random deletion order and the permuted labels.
        sanity_epochs: epochs the permuted-label copy trains.
        threshold: rank correlation at or above which a map fails a sanity check.
        key_patch: the patch that decides the label (a synthetic task): reports how often each
            map ranks it first.
        patch_size: the patch a map's grid is drawn over (None: the model's own).
        steps: points on the deletion / insertion curves (None: every patch).
    """

    samples: int = 100
    methods: Sequence[str] | None = None
    seed: int = 0
    split: str = "val"
    sanity_epochs: int = 5
    threshold: float = 0.5
    key_patch: int | None = None
    patch_size: int | None = None
    steps: int | None = None


def audit(
    model: nn.Module, splits: DataSplits, options: AuditOptions = AuditOptions(), retrain: Retrain | None = None
) -> AuditResult:
    """Audit ``options.methods`` on ``options.samples`` seeded images ``(samples, C, H, W)`` of ``options.split``;
    maps are ``(samples, gh, gw)`` over the patch grid. ``retrain`` trains the permuted-label copy
    (:data:`Retrain`) for ``sanity_epochs`` epochs; None skips that check.

    Occlusion is always computed (as the reference ordering). The model is put in eval mode.
    """
    samples, methods, seed, split = options.samples, options.methods, options.seed, options.split
    sanity_epochs, threshold, key_patch = options.sanity_epochs, options.threshold, options.key_patch
    start = time.perf_counter()
    data = _audited_split(splits, split, samples)
    methods = list(dict.fromkeys([*(applicable_methods(model) if methods is None else methods), "occlusion"]))
    model.eval()
    device = next(model.parameters()).device
    inputs_all = splits.normalize(data.images.to(device))
    probs = predict_logits(model, data.images.to(device), splits, amp=False).softmax(-1)
    confidence, prediction = probs.max(-1)
    labels = data.labels.to(device)
    g = torch.Generator().manual_seed(seed)
    index = torch.randperm(len(data), generator=g)[:samples].sort().values.to(device)
    inputs, target = inputs_all[index], prediction[index]
    size, _ = patch_layout(model, inputs.shape, options.patch_size)
    trained = compute_maps(model, inputs, methods, target, patch_size=size)
    curves, areas = _curves(model, inputs, target, trained, size, options.steps, g)
    stages, cascade = _cascade(model, inputs, methods, target, size, trained, seed)
    permuted = None
    if retrain is not None:
        permuted_model = retrain(permuted_labels(splits, seed), sanity_epochs)
        maps = compute_maps(permuted_model, inputs, methods, target, patch_size=size)
        permuted = {m: _mean(spearman(trained[m], maps[m])) for m in methods}
    rows = [_row(m, areas, cascade, permuted, trained[m], key_patch, threshold) for m in methods]
    cases = _cases(model, inputs_all, data, labels, probs, methods, size)
    return AuditResult(
        splits.name,
        split,
        index.tolist(),
        float((prediction == labels).float().mean()),
        rows,
        {"deletion_auc": areas["random"][0], "insertion_auc": areas["random"][1]},
        stages,
        curves,
        cases,
        list(data.classes),
        size,
        threshold,
        key_patch,
        sanity_epochs if retrain is not None else None,
        time.perf_counter() - start,
    )


def _audited_split(splits: DataSplits, split: str, samples: int) -> ImageDataset:
    """The split the audit reads, refusing one ``splits`` lacks and fewer than one sample."""
    data: ImageDataset | None = getattr(splits, split, None)
    if split not in ("train", "val", "test") or data is None:
        raise ConfigError(f"split {split!r} is not available for {splits.name}: use 'val' or 'test'")
    if samples < 1:
        raise ConfigError(f"samples must be >= 1, got {samples}")
    return splits.in_memory(split, "the audit")


def _curves(
    model: nn.Module,
    inputs: torch.Tensor,
    target: torch.Tensor,
    trained: dict[str, torch.Tensor],
    size: int,
    steps: int | None,
    generator: torch.Generator,
) -> tuple[dict[str, dict[str, list[float]]], dict[str, tuple[float, float]]]:
    """Mean deletion / insertion curves and their areas per method's order and for a random order
    (drawn from ``generator``, one per input) of the maps' ``gh * gw`` patches."""
    num_patches = next(iter(trained.values())).shape[-2:].numel()
    orders = {m: ranking(maps) for m, maps in trained.items()}
    orders["random"] = torch.stack([torch.randperm(num_patches, generator=generator) for _ in range(len(inputs))]).to(
        inputs.device
    )
    curves, areas = {}, {}
    for name, order in orders.items():
        deletion, insertion = deletion_insertion(model, inputs, order, target, size, steps)
        curves[name] = {"deletion": deletion.mean(0).tolist(), "insertion": insertion.mean(0).tolist()}
        areas[name] = (float(curve_area(deletion).mean()), float(curve_area(insertion).mean()))
    return curves, areas


def _row(
    method: str,
    areas: dict[str, tuple[float, float]],
    cascade: list[dict[str, float | None]],
    permuted: dict[str, float | None] | None,
    trained: torch.Tensor,
    key_patch: int | None,
    threshold: float,
) -> MethodAudit:
    """One method's row from the curve areas, the cascade's and the permuted copy's correlations, and
    its maps ``(B, gh, gw)`` of the trained model (for ``key_patch``)."""
    row = MethodAudit(
        method,
        *areas[method],
        cascade=[c[method] for c in cascade],
        permuted_rho=None if permuted is None else permuted[method],
    )
    row.randomised_rho = row.cascade[-1] if row.cascade else None
    if key_patch is not None:
        row.key_patch_top1 = float((trained.flatten(1).argmax(1) == key_patch).float().mean())
    row.verdict = _verdict(row, areas["random"], threshold)
    return row


def _verdict(row: MethodAudit, random: tuple[float, float], threshold: float) -> str:
    failed = [
        what
        for what, rho in (("weights randomised", row.randomised_rho), ("labels permuted", row.permuted_rho))
        if rho is not None and rho >= threshold
    ]
    if failed:
        return f"not explaining the model: barely changes with {' or '.join(failed)}"
    if row.deletion_auc >= random[0] and row.insertion_auc <= random[1]:
        return "no better than a random order"
    return "passes"


def _cascade(
    model: nn.Module,
    inputs: torch.Tensor,
    methods: list[str],
    target: torch.Tensor,
    size: int,
    trained: dict[str, torch.Tensor],
    seed: int,
) -> tuple[list[str], list[dict[str, float | None]]]:
    """Mean rank correlations after each stage of cascading randomisation."""
    broken = copy.deepcopy(model)
    g = torch.Generator().manual_seed(seed + 1)
    names, rhos = [], []
    for name, params in cascade_stages(broken):
        randomise_(params, g)
        maps = compute_maps(broken, inputs, methods, target, patch_size=size)
        names.append(name)
        rhos.append({m: _mean(spearman(trained[m], maps[m])) for m in methods})
    return names, rhos


def _cases(
    model: nn.Module,
    inputs: torch.Tensor,
    data: ImageDataset,
    labels: torch.Tensor,
    probs: torch.Tensor,
    methods: list[str],
    size: int,
) -> list[Case]:
    """The most and least confident correct and wrong predictions (``probs (N, K)``) of the split."""
    confidence, prediction = probs.max(-1)
    correct = prediction == labels
    picks = []
    for kind, group, most in zip(CASES, (correct, correct, ~correct, ~correct), (True, False, True, False)):
        if group.any():
            members = group.nonzero()[:, 0]
            picks.append((kind, int(members[confidence[members].argmax() if most else confidence[members].argmin()])))
    if not picks:
        return []
    index = torch.tensor([i for _, i in picks], device=inputs.device)
    maps = compute_maps(model, inputs[index], methods, prediction[index], patch_size=size)
    spreads = head_attention(model, inputs[index])[1]["spread"][:, -1] if "attention" in methods else None
    return [
        Case(
            kind,
            i,
            int(labels[i]),
            int(prediction[i]),
            float(confidence[i]),
            data.images[i].cpu(),
            {m: maps[m][j].cpu() for m in methods},
            None if spreads is None else spreads[j].tolist(),
        )
        for j, (kind, i) in enumerate(picks)
    ]


def write_audit(result: AuditResult, out_dir: str | Path) -> list[Path]:
    """Write ``audit.json``, ``audit.md``, ``curves.png``, ``cascade.png`` and one ``case_*.png`` per
    highlighted prediction into ``out_dir``; returns the paths."""
    from .figures import plot_cascade, plot_curves, plot_maps

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "audit.json", out / "audit.md", out / "curves.png", out / "cascade.png"]
    write_json(paths[0], result.to_dict())
    atomic_write(paths[1], result.markdown().encode())
    plot_curves(result.curves, paths[2], title=f"{result.dataset} {result.split}: {len(result.samples)} samples")
    plot_cascade({r.method: r.cascade for r in result.rows}, result.stages, paths[3], threshold=result.threshold)
    for case in result.cases:
        path = out / f"case_{case.kind.replace(' ', '_')}.png"
        spreads = (" | spreads " + " ".join(f"{s:.2f}" for s in case.head_spreads)) if case.head_spreads else ""
        plot_maps(
            case.image,
            case.maps,
            path,
            title=f"{case.kind}: {result.classes[case.label]} → "
            f"{result.classes[case.prediction]} ({case.confidence:.3f}){spreads}",
            patch=result.patch_size,
        )
        paths.append(path)
    return paths
