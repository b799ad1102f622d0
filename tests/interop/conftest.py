"""Shared fixtures for the interop tests."""

import pytest
import torch
from torch import nn


@pytest.fixture
def perturb():
    """Add noise to every parameter in place, so that none keeps an init value that would hide a
    wrong mapping (zero biases, unit LayerNorm scales, layer scale 1e-5, class token ~1e-6)."""

    def apply(module: nn.Module) -> nn.Module:
        with torch.no_grad():
            for p in module.parameters():
                p.add_(0.05 * torch.randn_like(p))
        return module

    return apply
