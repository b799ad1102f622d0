"""What a map is measured by: deletion / insertion curves, their areas, rank correlation, randomisation.

- :func:`deletion_insertion`: set (reveal) the patches in the order a map ranks them (:func:`ranking`),
  most important first, and track a class's probability; :func:`curve_area` integrates a curve over the
  fraction of patches, :func:`step_counts` says how many patches each point removes.
- :func:`spearman`: the rank correlation of two maps, the sanity checks' measure of change.
- :func:`cascade_stages` and :func:`randomise_`: a model's parameters from the head down to the input, and
  each tensor replaced by noise of its own mean and spread (cascading randomisation).

:mod:`~vitlab.explain.audit` puts them together; the explorer's limits page draws them one image at a time.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import torch
from scipy.stats import rankdata
from torch import nn

from ..errors import ConfigError
from .maps import masked_probs, patch_layout

# -- curves -------------------------------------------------------------------------------------------


def step_counts(num_patches: int, steps: int | None = None) -> torch.Tensor:
    """How many patches are removed at each point of a curve: ``round(linspace(0, N, S + 1))``,
    ``S = steps`` or ``N`` (every patch)."""
    steps = num_patches if steps is None else steps
    if steps < 1:
        raise ConfigError(f"steps must be >= 1, got {steps}")
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
