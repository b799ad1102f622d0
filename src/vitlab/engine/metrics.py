"""Classification metrics on logits / probabilities: accuracy, NLL, calibration, confusion.

Inputs are logits or probabilities ``(N, K)`` and integer labels ``(N,)``. Calibration uses
``n_bins`` equal-width bins of the confidence (the top probability), bin ``b`` holding the
confidences in ``(b/n, (b+1)/n]`` (the first bin also holds 0). Per-bin *sums* are returned so
that shards of a dataset can be all-reduced before the ECE is formed.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..errors import ConfigError


def accuracy(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of rows whose arg-max in ``scores (N, K)`` equals ``labels (N,)``."""
    return (scores.argmax(dim=1) == labels).float().mean().item()


def nll(logits: torch.Tensor, labels: torch.Tensor, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of ``labels (N,)`` under ``softmax(logits / T)``, ``logits (N, K)``."""
    return F.cross_entropy(logits.float() / temperature, labels).item()


def calibration_bins(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> torch.Tensor:
    """Per-bin sums ``(3, n_bins)``: rows are count, sum of confidence, number correct.

    ``probs (N, K)`` are class probabilities; the confidence of a row is its maximum.
    """
    if n_bins < 1:
        raise ConfigError(f"n_bins must be >= 1, got {n_bins}")
    confidence, predicted = probs.float().max(dim=1)
    index = (torch.ceil(confidence * n_bins).long() - 1).clamp(0, n_bins - 1)
    sums = torch.zeros(3, n_bins, dtype=torch.float64, device=probs.device)
    sums[0].index_add_(0, index, torch.ones_like(confidence, dtype=torch.float64))
    sums[1].index_add_(0, index, confidence.double())
    sums[2].index_add_(0, index, (predicted == labels).double())
    return sums


def ece_from_bins(bins: torch.Tensor) -> float:
    """Expected calibration error from :func:`calibration_bins` sums:
    ``sum_b |B_b| / N * |acc(B_b) - conf(B_b)|`` = ``sum_b |correct_b - confidence_b| / N``."""
    total = bins[0].sum().item()
    return (bins[2] - bins[1]).abs().sum().item() / total if total else math.nan


def ece(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> float:
    """Expected calibration error of ``probs (N, K)`` against ``labels (N,)`` over ``n_bins`` equal bins."""
    return ece_from_bins(calibration_bins(probs, labels, n_bins))


def reliability(probs: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> dict[str, list[float]]:
    """The reliability diagram's data: per-bin ``count``, mean ``confidence`` and ``accuracy``
    (None for empty bins) and the bin ``edges`` (``n_bins + 1`` values)."""
    count, conf, correct = calibration_bins(probs, labels, n_bins).tolist()
    return {
        "edges": torch.linspace(0, 1, n_bins + 1).tolist(),
        "count": [int(c) for c in count],
        "confidence": [s / c if c else None for s, c in zip(conf, count)],
        "accuracy": [s / c if c else None for s, c in zip(correct, count)],
    }


def confusion_matrix(predicted: torch.Tensor, labels: torch.Tensor, num_classes: int) -> torch.Tensor:
    """``(K, K)`` int64 counts: row = true class, column = predicted class."""
    flat = labels.long() * num_classes + predicted.long()
    return torch.bincount(flat, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def per_class_accuracy(confusion: torch.Tensor) -> torch.Tensor:
    """Recall of each class ``(K,)`` from a confusion matrix ``(K, K)``; NaN for absent classes."""
    support = confusion.sum(dim=1).double()
    return torch.where(support > 0, confusion.diagonal().double() / support.clamp_min(1), math.nan)


def fit_temperature(logits: torch.Tensor, labels: torch.Tensor, max_iter: int = 100) -> float:
    """The temperature ``T > 0`` minimising the NLL of ``softmax(logits / T)`` (``logits (N, K)``).

    Optimises ``log T`` with L-BFGS, so ``T`` stays positive.
    """
    logits = logits.detach().float()
    log_t = torch.zeros((), requires_grad=True)
    opt = torch.optim.LBFGS([log_t], lr=0.1, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(logits / log_t.exp(), labels)
        loss.backward()
        return loss

    opt.step(closure)
    return log_t.exp().item()
