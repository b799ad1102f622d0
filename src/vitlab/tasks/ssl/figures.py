"""Figures of pretraining runs: loss curves, and MAE's original / masked / reconstruction grids.

Drawn on :class:`matplotlib.figure.Figure` objects directly (no pyplot, no backend chosen)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from ...ops.patches import patchify, unpatchify

MONITORS = ("train_loss", "train_teacher_entropy", "train_teacher_student_kl")


def plot_pretrain_loss(history: list[dict[str, Any]], path: str | Path, title: str = "") -> None:
    """The per-epoch training loss (and DINO's collapse monitors when present) against the epoch;
    ``history`` holds the engine's epoch records."""
    keys = [k for k in MONITORS if k in history[0]]
    fig = Figure(figsize=(4 * len(keys), 3))
    axes = fig.subplots(1, len(keys), squeeze=False)
    epochs = [r["epoch"] for r in history]
    for ax, key in zip(axes[0], keys):
        ax.plot(epochs, [r[key] for r in history], marker="o" if len(epochs) < 20 else None)
        ax.set_xlabel("epoch")
        ax.set_ylabel(key.removeprefix("train_"))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def plot_reconstructions(
    images: torch.Tensor,
    pred: torch.Tensor,
    mask: torch.Tensor,
    patch_size: int,
    path: str | Path,
    norm_pix: bool = False,
) -> None:
    """Rows of original / masked / reconstruction (visible patches pasted back) for ``images (B, C, H, W)``.

    ``pred (B, N, P*P*C)``, ``mask (B, N)`` 1 where hidden. With ``norm_pix`` the predictions are
    de-normalised by each true patch's mean and standard deviation.
    """
    images, pred, mask = images.detach().float().cpu(), pred.detach().float().cpu(), mask.detach().float().cpu()
    grid = (images.shape[-2] // patch_size, images.shape[-1] // patch_size)
    target = patchify(images, patch_size)
    if norm_pix:
        pred = pred * (target.var(-1, keepdim=True) + 1e-6).sqrt() + target.mean(-1, keepdim=True)
    hidden = mask[..., None]
    masked = unpatchify(target * (1 - hidden) + target.min() * hidden, patch_size, grid)
    recon = unpatchify(target * (1 - hidden) + pred * hidden, patch_size, grid)
    rows = [("original", images), ("masked", masked), ("reconstruction", recon)]
    b = images.shape[0]
    fig = Figure(figsize=(1.2 * b, 3.8))
    axes = fig.subplots(3, b, squeeze=False)
    for r, (name, batch) in enumerate(rows):
        for i in range(b):
            ax = axes[r][i]
            img = batch[i]
            ax.imshow((img[0] if img.shape[0] == 1 else img.permute(1, 2, 0).clamp(0, 1)).numpy(), cmap="gray")
            ax.set_xticks([])
            ax.set_yticks([])
        axes[r][0].set_ylabel(name, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
