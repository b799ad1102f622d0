"""Frozen-feature evaluation: a linear probe and a k-nearest-neighbour classifier.

Features are the backbone's pooled pre-logits ``(N, D)``: ``forward_head(forward_features(x),
pre_logits=True)`` (a distilled ViT's distillation token is left out of the pooling). The probe
is a softmax regression on standardised features, fitted full-batch by L-BFGS with an L2 penalty;
kNN votes among the ``k`` most cosine-similar training
features with weights ``exp(similarity / T)`` (DINO's protocol).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from ...checks import Bool, Int, Maybe
from ...data import ImageDataset, StreamDataset
from ...data.options import DataOptions
from ...data.preprocess import Normalizes
from ...engine.evaluate import batches_of, eval_batch_size
from ...errors import ConfigError, DataError
from ...runs import checkpoint_data
from ...settings import picked
from ..requests import EvaluateRequest, option

if TYPE_CHECKING:
    from ...runs import Loaded

PROBES = ("linear", "knn")


@torch.no_grad()
def extract_features(
    model: nn.Module, data: ImageDataset | StreamDataset, inputs: Normalizes, batch_size: int | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pooled features ``(N, D)`` float32 and labels ``(N,)`` of every image of ``data`` (held in memory or
    streamed, read ``batch_size`` at a time: :func:`~vitlab.engine.evaluate.eval_batch_size` by default),
    normalised by ``inputs`` (the splits, a data config); ``model`` in eval mode."""
    model.eval()
    device = next(model.parameters()).device
    backbone: Any = model
    features, labels = [], []
    index = torch.arange(len(data))
    for images, y in batches_of(data, index, batch_size or eval_batch_size(device), device):
        tokens = backbone.forward_features(inputs.normalize(images.to(device)))
        features.append(backbone.forward_head(tokens, pre_logits=True).float())
        labels.append(y.to(device))
    if not features:
        raise DataError("the probe has no image to take features of: this split is empty")
    return torch.cat(features), torch.cat(labels)


def linear_probe(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    weight_decay: float = 1e-4,
    steps: int = 100,
) -> float:
    """Accuracy on ``test`` of a softmax regression fitted on ``train`` features ``(N, D)``; fewer than two
    training rows, or features that are not finite, are refused in one line (L-BFGS would fail on them)."""
    if len(train_x) < 2:
        raise DataError(
            f"the linear probe standardises its {len(train_x)} training row(s) and needs at least 2: raise --rows"
        )
    if not bool(torch.isfinite(train_x).all()) or not bool(torch.isfinite(test_x).all()):
        raise DataError("the model's features are not finite (NaN or infinity): the linear probe cannot fit them")
    mu, sigma = train_x.mean(0), train_x.std(0).clamp_min(1e-6)
    xtr, xte = (train_x - mu) / sigma, (test_x - mu) / sigma
    linear = nn.Linear(xtr.shape[1], num_classes).to(xtr.device)
    optimizer = torch.optim.LBFGS(linear.parameters(), lr=1.0, max_iter=steps, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(linear(xtr), train_y) + weight_decay * linear.weight.pow(2).sum()
        loss.backward()
        return loss

    with torch.enable_grad():
        optimizer.step(closure)
    with torch.no_grad():
        return (linear(xte).argmax(1) == test_y).float().mean().item()


@torch.no_grad()
def knn_accuracy(
    train_x: torch.Tensor,
    train_y: torch.Tensor,
    test_x: torch.Tensor,
    test_y: torch.Tensor,
    num_classes: int,
    k: int = 20,
    temperature: float = 0.07,
) -> float:
    """Accuracy of weighted cosine kNN (``k`` neighbours, weights ``exp(sim / T)``)."""
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k}")
    k = min(k, len(train_x))
    bank = F.normalize(train_x, dim=1)
    correct = 0
    for chunk, labels in zip(F.normalize(test_x, dim=1).split(1024), test_y.split(1024)):
        sim, idx = (chunk @ bank.T).topk(k, dim=1)
        votes = torch.zeros(len(chunk), num_classes, device=chunk.device)
        votes.scatter_add_(1, train_y[idx], (sim / temperature).exp())
        correct += (votes.argmax(1) == labels).sum().item()
    return correct / len(test_x)


def probe_model(
    model: nn.Module,
    train: ImageDataset | StreamDataset,
    test: ImageDataset | StreamDataset,
    inputs: Normalizes,
    method: str = "linear",
    k: int = 20,
) -> float:
    """Frozen-feature accuracy of ``model`` on ``test`` by ``method`` (``linear`` | ``knn``) fitted on ``train``."""
    if method not in PROBES:
        raise ConfigError(f"unknown probe {method!r}: choose one of {PROBES}")
    (xtr, ytr), (xte, yte) = extract_features(model, train, inputs), extract_features(model, test, inputs)
    if method == "linear":
        return linear_probe(xtr, ytr, xte, yte, len(train.classes))
    return knn_accuracy(xtr, ytr, xte, yte, len(train.classes), k)


def probe_checkpoint(
    path: str | Path | Loaded,
    method: str = "linear",
    *,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    split: str = "test",
    rows: int | None = None,
    k: int = 20,
    device: str = "auto",
    options: DataOptions | None = None,
) -> dict[str, Any]:
    """Fit ``method`` on the training split's frozen features (first ``rows`` rows if given) and score ``split``
    (image files read as ``options`` say; a model already loaded is used as it is)."""
    ckpt, splits = checkpoint_data(path, dataset, data_dir, device, rows=rows, options=options)
    ckpt.check_finite(f"the {method} probe")
    name = splits.name
    data = getattr(splits, split)
    if data is None:
        raise DataError(f"{name} has no {split} split here: use --split val")
    acc = probe_model(ckpt.model, splits.train, data, splits, method, k)
    return {
        "checkpoint": str(ckpt.path),
        "model": ckpt.display_name,
        "dataset": name,
        "split": split,
        "probe": method,
        "k": k if method == "knn" else None,
        "train_rows": len(splits.train),
        "n": len(data),
        "accuracy": acc,
    }


@dataclass
class ProbeRequest(EvaluateRequest):
    """``vitlab evaluate`` of frozen features: a ``linear_probe`` and / or ``knn`` with ``k`` neighbours, fitted
    on the first ``rows`` training rows."""

    linear_probe: bool = option(False, "accuracy of a linear classifier on frozen features", Bool())
    knn: bool = option(False, "accuracy of weighted k-NN on frozen features", Bool())
    k: int = option(20, "neighbours for --knn", Int(1, 100_000))
    rows: int | None = option(None, "probes: fit on the first N training rows only", Maybe(Int(1, 2**40)))


def probe_lines(request: ProbeRequest, loaded: Loaded | None = None) -> str:
    """``vitlab evaluate --linear-probe`` / ``--knn``: one line per probe asked for (of ``loaded`` when given,
    else of ``request.checkpoint``)."""
    lines = []
    for method, wanted in (("linear", request.linear_probe), ("knn", request.knn)):
        if wanted:
            asked = picked(request, "dataset", "data_dir", "split", "rows", "k", "device", "options")
            probe = probe_checkpoint(loaded or request.checkpoint, method, **asked)
            name = "linear probe" if method == "linear" else f"{request.k}-NN"
            lines.append(
                f"{probe['model']} frozen features, {name} fitted on {probe['train_rows']} train rows: "
                f"{probe['dataset']} {probe['split']} ({probe['n']} images) accuracy {probe['accuracy']:.4f}"
            )
    return "\n".join(lines)
