"""Record attention weights ``(B, H, N, N)`` from every self-attention layer of any vitlab model.

    with record_attention(model) as recorder:
        logits = model(images)              # the fast (fused) path runs as usual
    recorder.weights                        # one (B, H, N, N) tensor per layer, in module order

A forward hook on each :class:`~vitlab.layers.attention.MultiHeadSelfAttention` receives the
layer's input (and ``rope``, by keyword or position) and recomputes the weights with the
module's own explicit math (:meth:`forward_with_weights`: its scale, mask, temperature, rotary
positions and q/k norms). The hook returns nothing, so the module's real output is untouched:
logits while recording are bitwise the ones without it. The recomputation runs without
gradients and inside a forked RNG, so a model in training mode (dropout) draws the same random
numbers as it would unrecorded. Hooks are removed on exit.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from ..errors import ConfigError
from ..layers.attention import MultiHeadSelfAttention


def attention_layers(model: nn.Module) -> list[tuple[str, MultiHeadSelfAttention]]:
    """``(name, module)`` of every self-attention layer in ``model``, in module order.

    Raises :class:`~vitlab.errors.ConfigError` when there is none (a convnet): attention maps need a transformer.
    """
    layers = [(name, m) for name, m in model.named_modules() if isinstance(m, MultiHeadSelfAttention)]
    if not layers:
        raise ConfigError(
            f"{type(model).__name__} has no MultiHeadSelfAttention layers, so it has no attention "
            f"to record: use a ViT, or the gradient and occlusion maps, which work for any model"
        )
    return layers


class AttentionRecorder:
    """Holds the weights recorded by :func:`record_attention`.

    ``weights[i]`` is layer ``names[i]``'s ``(B, H, N, N)`` for the latest forward pass (rows are
    queries, columns keys; each row sums to 1). A second forward pass replaces them.
    """

    def __init__(self, layers: list[tuple[str, MultiHeadSelfAttention]]) -> None:
        self.names = [name for name, _ in layers]
        self._index = {id(module): i for i, (_, module) in enumerate(layers)}
        self._weights: list[torch.Tensor | None] = [None] * len(layers)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def weights(self) -> list[torch.Tensor]:
        """One ``(B, H, N, N)`` tensor per attention layer, in module order."""
        missing = [name for name, w in zip(self.names, self._weights) if w is None]
        if missing:
            raise ValueError(
                f"no attention recorded for {missing}: run the model forward inside "
                f"`with record_attention(model) as recorder:` first"
            )
        return [w for w in self._weights if w is not None]

    def stack(self) -> torch.Tensor:
        """All layers' weights ``(L, B, H, N, N)`` (layers must agree in token count)."""
        return torch.stack(self.weights)

    def clear(self) -> None:
        self._weights = [None] * len(self.names)

    def hook(
        self, module: MultiHeadSelfAttention, args: tuple[Any, ...], kwargs: dict[str, Any], output: torch.Tensor
    ) -> None:
        x = args[0] if args else kwargs["x"]
        rope = args[1] if len(args) > 1 else kwargs.get("rope")
        devices = [x.device] if x.device.type == "cuda" else []
        with torch.no_grad(), torch.random.fork_rng(devices=devices):
            _, weights = module.forward_with_weights(x.detach(), rope)
        self._weights[self._index[id(module)]] = weights


@contextmanager
def record_attention(model: nn.Module) -> Iterator[AttentionRecorder]:
    """Record every attention layer's weights ``(B, H, N, N)`` while ``model`` runs in the block.

    The model keeps its fast attention path; see the module docstring. Raises :class:`~vitlab.errors.ConfigError`
    for a model without :class:`MultiHeadSelfAttention` layers.
    """
    layers = attention_layers(model)
    recorder = AttentionRecorder(layers)
    handles = [module.register_forward_hook(recorder.hook, with_kwargs=True) for _, module in layers]
    try:
        yield recorder
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def attention_weights(model: nn.Module, inputs: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Run ``model`` on ``inputs`` (its normalised input ``(B, C, H, W)``) once, recording.

    Returns ``(logits (B, K), weights)``, ``weights`` one ``(B, H, N, N)`` per layer.
    """
    with record_attention(model) as recorder:
        logits = model(inputs)
    return logits, recorder.weights
