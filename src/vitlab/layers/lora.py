"""Low-rank adaptation (Hu et al. 2021) of a frozen linear layer.

``y = W x + b + (alpha / r) * B A dropout(x)`` with ``A (r, D_in)`` and ``B (D_out, r)``; ``A`` starts as
Kaiming-uniform and ``B`` at zero (peft's initialisation), so the adapted layer first computes the
layer's own output. A fused projection (a ViT's ``qkv``, ``D_out = 3 D``) is ``chunks`` equal output parts;
each adapted part has its own ``A`` and ``B`` (``B (D_out / chunks, r)``), as peft adapts Hugging Face's
separate ``query`` / ``key`` / ``value`` layers. :meth:`LoRALinear.merged` folds the adapters into one plain
``nn.Linear``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
from torch import nn

from ..errors import ConfigError


class LoRALinear(nn.Module):
    """``base`` (kept, frozen by the caller) plus low-rank updates of the output parts ``parts``.

    ``parts`` maps each adapted part's name to its index among ``chunks`` equal parts of the output
    (``{"q": 0, "v": 2}`` of a fused qkv with ``chunks=3``; ``{"proj": 0}`` of a plain layer). Inputs
    ``(..., D_in)`` -> outputs ``(..., D_out)``. Parameters ``lora_a[name] (r, D_in)`` and
    ``lora_b[name] (D_out / chunks, r)``; the scaling is ``alpha / rank``.
    """

    def __init__(
        self,
        base: nn.Linear,
        parts: Mapping[str, int],
        rank: int,
        alpha: float,
        dropout: float = 0.0,
        chunks: int = 1,
    ) -> None:
        super().__init__()
        if base.out_features % chunks:
            raise ConfigError(f"a layer of {base.out_features} outputs does not split into {chunks} equal parts")
        width = base.out_features // chunks
        if not 0 < rank <= min(base.in_features, width):
            raise ConfigError(
                f"LoRA rank {rank} must lie in 1..{min(base.in_features, width)} for a layer of "
                f"{base.in_features} inputs and {width} outputs per part: set tune.rank in that range"
            )
        if not parts or any(not 0 <= i < chunks for i in parts.values()):
            raise ConfigError(f"LoRA parts {dict(parts)} must index the {chunks} output part(s)")
        self.base = base
        self.parts = dict(sorted(parts.items(), key=lambda item: item[1]))
        self.rank, self.alpha, self.chunks = rank, alpha, chunks
        self.scaling = alpha / rank
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        weight = base.weight
        self.lora_a = nn.ParameterDict(
            {
                n: nn.Parameter(torch.empty(rank, base.in_features, device=weight.device, dtype=weight.dtype))
                for n in self.parts
            }
        )
        self.lora_b = nn.ParameterDict(
            {n: nn.Parameter(torch.zeros(width, rank, device=weight.device, dtype=weight.dtype)) for n in self.parts}
        )
        for a in self.lora_a.values():
            nn.init.kaiming_uniform_(a, a=math.sqrt(5))

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def bias(self) -> torch.Tensor | None:
        """The base layer's bias (LoRA leaves it as it is)."""
        return self.base.bias

    def delta(self, x: torch.Tensor | None = None) -> torch.Tensor:
        """The update: ``x (..., D_in)`` -> ``(..., D_out)``; without ``x``, the weight update ``(D_out, D_in)``."""
        width = self.base.out_features // self.chunks
        pieces: list[torch.Tensor | None] = [None] * self.chunks
        for name, index in self.parts.items():
            a, b = self.lora_a[name], self.lora_b[name]
            pieces[index] = (b @ a if x is None else (x @ a.t()) @ b.t()) * self.scaling
        shape = (width, self.in_features) if x is None else (*x.shape[:-1], width)
        ref = self.base.weight if x is None else x
        return torch.cat([p if p is not None else ref.new_zeros(shape) for p in pieces], dim=-1 if x is not None else 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., D_in)`` -> ``(..., D_out)``."""
        return self.base(x) + self.delta(self.dropout(x)).to(x.dtype)

    @torch.no_grad()
    def merged(self) -> nn.Linear:
        """One plain ``nn.Linear`` computing this layer (dropout off): ``W + (alpha / r) B A``, the same bias."""
        base = self.base
        linear = nn.Linear(base.in_features, base.out_features, bias=base.bias is not None)
        linear.to(device=base.weight.device, dtype=base.weight.dtype)
        linear.weight.copy_(base.weight + self.delta().to(base.weight.dtype))
        if base.bias is not None:
            linear.bias.copy_(base.bias)
        return linear

    def extra_repr(self) -> str:
        return f"parts={list(self.parts)}, rank={self.rank}, alpha={self.alpha:g}"
