"""Test what an explanation map is worth: deletion / insertion curves and sanity checks.

- Deletion (insertion): set (reveal) the patches in the order a map ranks them, most important
  first, and track the probability of the class predicted on the intact image. A map that finds the
  evidence makes the deletion curve fall fast (low area) and the insertion curve rise fast (high
  area). Both are compared with a random order and with the occlusion map's order. The removed
  value is the baseline 0, the dataset mean after normalisation; insertion starts from an image
  that is all baseline. Areas are trapezoids over the fraction of patches, so they lie in [0, 1].
- Sanity checks (Adebayo et al. 2018): the maps are recomputed (for the same inputs and classes)
  after randomising the model's weights stage by stage from the head down (cascading
  randomisation: each tensor replaced by noise of its own mean and spread, :func:`randomise_`),
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
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import rankdata
from torch import nn

from ..data import DataSplits, ImageDataset, normalize
from ..engine import fit, predict_logits
from ..runs import atomic_write, write_json
from ..tasks.classify import ClassificationTask, TrainConfig, build_model
from .maps import applicable_methods, compute_maps, head_attention, masked_probs, patch_layout

CASES = ("confident correct", "unsure correct", "confident wrong", "unsure wrong")


# -- curves -------------------------------------------------------------------------------------------


def step_counts(num_patches: int, steps: int | None = None) -> torch.Tensor:
    """How many patches are removed at each point of a curve: ``round(linspace(0, N, S + 1))``,
    ``S = steps`` or ``N`` (every patch)."""
    steps = num_patches if steps is None else steps
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    return torch.linspace(0, num_patches, steps + 1).round().long()


def deletion_insertion(
    model: nn.Module,
    inputs: torch.Tensor,
    order: torch.Tensor,
    target: torch.Tensor,
    patch_size: int | None = None,
    steps: int | None = None,
    baseline: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Deletion and insertion curves ``(B, S + 1)`` each, for normalised ``inputs (B, C, H, W)``.

    ``order (B, gh*gw)`` lists each image's patches most important first; point ``s`` of a curve
    is the class-``target`` probability with the first ``step_counts(N, steps)[s]`` patches set to
    ``baseline`` (deletion) or with only those patches kept (insertion).
    """
    size, grid = patch_layout(model, inputs.shape, patch_size)
    b, n = order.shape
    counts = step_counts(n, steps).to(order.device)
    rank = torch.empty_like(order).scatter_(1, order, torch.arange(n, device=order.device).expand(b, n))
    early = rank[:, None, :] < counts[None, :, None]  # (B, S + 1, N): among the first k
    both = masked_probs(model, inputs, torch.cat([~early, early], 1), target, size, baseline)
    return both[:, : len(counts)], both[:, len(counts) :]


def curve_area(curves: torch.Tensor) -> torch.Tensor:
    """Trapezoid area under curves ``(..., S + 1)`` sampled evenly over [0, 1]: ``(...)``."""
    return torch.trapezoid(curves, dx=1.0 / (curves.shape[-1] - 1), dim=-1)


def ranking(maps: torch.Tensor) -> torch.Tensor:
    """Patch order, most important first: maps ``(B, gh, gw)`` -> ``(B, gh*gw)``."""
    return maps.flatten(1).argsort(dim=1, descending=True, stable=True)


def spearman(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Spearman rank correlation of each pair of maps ``(B, ...)``: ``(B,)``, ties ranked by their
    average; NaN where a map is constant."""
    ra = rankdata(a.flatten(1).double().cpu().numpy(), axis=1)
    rb = rankdata(b.flatten(1).double().cpu().numpy(), axis=1)
    ra, rb = ra - ra.mean(1, keepdims=True), rb - rb.mean(1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = (ra * rb).sum(1) / np.sqrt((ra**2).sum(1) * (rb**2).sum(1))
    return torch.from_numpy(rho)


# -- randomisation --------------------------------------------------------------------------------------


def cascade_stages(model: nn.Module) -> list[tuple[str, list[nn.Parameter]]]:
    """The model's parameters in stages from the output back to the input: ``(name, parameters)``.

    Stages are the top-level children in reverse order (a ``ModuleList`` or ``Sequential``
    contributes each element, last first), then the model's own parameters (class and register
    tokens) as ``"tokens"``. Stages without trainable parameters are skipped.
    """
    stages: list[tuple[str, list[nn.Parameter]]] = [("tokens", list(model.parameters(recurse=False)))]
    for name, child in model.named_children():
        parts = list(enumerate(child)) if isinstance(child, (nn.ModuleList, nn.Sequential)) else [(None, child)]
        stages += [(name if i is None else f"{name}.{i}", list(part.parameters())) for i, part in parts]
    return [(name, params) for name, params in reversed(stages) if any(p.requires_grad for p in params)]


@torch.no_grad()
def randomise_(params: Iterable[nn.Parameter], generator: torch.Generator) -> None:
    """Replace each parameter tensor, in place, by Gaussian noise with the tensor's own mean and
    standard deviation: the scale survives, the learnt structure does not. Single numbers (a
    temperature) are kept. Seeded by ``generator``."""
    for p in params:
        if p.numel() > 1:
            noise = torch.randn(p.shape, generator=generator, dtype=torch.float32).to(p)
            p.copy_(noise * p.std() + p.mean())


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


def audit(
    model: nn.Module,
    splits: DataSplits,
    samples: int = 100,
    methods: Sequence[str] | None = None,
    seed: int = 0,
    split: str = "val",
    train_config: TrainConfig | None = None,
    sanity_epochs: int = 5,
    threshold: float = 0.5,
    key_patch: int | None = None,
    patch_size: int | None = None,
    steps: int | None = None,
) -> AuditResult:
    """Audit ``methods`` (default: every method that applies to ``model``) on ``samples`` seeded
    images of ``split``.

    Args:
        train_config: a :class:`~vitlab.engine.TrainConfig` for the permuted-label check (its
            ``epochs`` replaced by ``sanity_epochs``, no files written); None skips that check.
        threshold: rank correlation at or above which a map fails a sanity check.
        key_patch: the patch that decides the label (a synthetic task): reports how often each
            map ranks it first.
        steps: points on the deletion / insertion curves (default: every patch).

    Occlusion is always computed (as the reference ordering). The model is put in eval mode.
    """
    start = time.perf_counter()
    data: ImageDataset | None = getattr(splits, split, None)
    if split not in ("train", "val", "test") or data is None:
        raise ValueError(f"split {split!r} is not available for {splits.name}: use 'val' or 'test'")
    if samples < 1:
        raise ValueError(f"samples must be >= 1, got {samples}")
    methods = list(dict.fromkeys([*(applicable_methods(model) if methods is None else methods), "occlusion"]))
    model.eval()
    device = next(model.parameters()).device
    inputs_all = normalize(data.images.to(device), splits.mean, splits.std)
    probs = predict_logits(model, data.images.to(device), splits.mean, splits.std, amp=False).softmax(-1)
    confidence, prediction = probs.max(-1)
    labels = data.labels.to(device)
    g = torch.Generator().manual_seed(seed)
    index = torch.randperm(len(data), generator=g)[:samples].sort().values.to(device)
    inputs, target = inputs_all[index], prediction[index]
    size, grid = patch_layout(model, inputs.shape, patch_size)
    trained = compute_maps(model, inputs, methods, target, patch_size=size)

    orders = {m: ranking(trained[m]) for m in methods}
    n = grid[0] * grid[1]
    orders["random"] = torch.stack([torch.randperm(n, generator=g) for _ in range(len(index))]).to(device)
    curves, areas = {}, {}
    for name, order in orders.items():
        deletion, insertion = deletion_insertion(model, inputs, order, target, size, steps)
        curves[name] = {"deletion": deletion.mean(0).tolist(), "insertion": insertion.mean(0).tolist()}
        areas[name] = (float(curve_area(deletion).mean()), float(curve_area(insertion).mean()))

    stages, cascade = _cascade(model, inputs, methods, target, size, trained, seed)
    permuted = None
    if train_config is not None:
        permuted = _permuted_rho(
            model, splits, inputs, methods, target, size, trained, train_config, sanity_epochs, seed
        )
    rows = []
    for m in methods:
        row = MethodAudit(
            m, *areas[m], cascade=[c[m] for c in cascade], permuted_rho=None if permuted is None else permuted[m]
        )
        row.randomised_rho = row.cascade[-1] if row.cascade else None
        if key_patch is not None:
            row.key_patch_top1 = float((trained[m].flatten(1).argmax(1) == key_patch).float().mean())
        row.verdict = _verdict(row, areas["random"], threshold)
        rows.append(row)
    cases = _cases(model, inputs_all, data, labels, prediction, confidence, methods, size)
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
        sanity_epochs if train_config is not None else None,
        time.perf_counter() - start,
    )


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


def _permuted_rho(
    model: nn.Module,
    splits: DataSplits,
    inputs: torch.Tensor,
    methods: list[str],
    target: torch.Tensor,
    size: int,
    trained: dict[str, torch.Tensor],
    train_config: TrainConfig,
    epochs: int,
    seed: int,
) -> dict[str, float | None]:
    device = next(model.parameters()).device
    config = replace(train_config, epochs=epochs, out_dir=None, resume=False, device=str(device))
    permuted = permuted_labels(splits, seed)
    copy_model = fit(ClassificationTask(build_model(config, permuted), permuted, config), config).model.eval()
    maps = compute_maps(copy_model, inputs, methods, target, patch_size=size)
    return {m: _mean(spearman(trained[m], maps[m])) for m in methods}


def _cases(
    model: nn.Module,
    inputs: torch.Tensor,
    data: ImageDataset,
    labels: torch.Tensor,
    prediction: torch.Tensor,
    confidence: torch.Tensor,
    methods: list[str],
    size: int,
) -> list[Case]:
    """The most and least confident correct and wrong predictions of the split."""
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
