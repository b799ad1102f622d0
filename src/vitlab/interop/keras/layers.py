"""One Keras layer's weights as vitlab's tensors: a Dense as ``(weight (out, in), bias (out,))``, a
LayerNormalization as ``(gamma (D,), beta (D,))``, a MultiHeadAttention as fused ``qkv`` ``(3D, D)`` and
``proj`` ``(D, D)`` weights; each refuses, by the layer's name, the options vitlab's layers do not have."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

from ..errors import CheckpointError
from .keymaps import StateDict


def to_tensor(array: Any) -> torch.Tensor:
    """An array-like (any shape) as a float32 tensor of its own memory."""
    return torch.from_numpy(np.array(array, dtype=np.float32))


def read_dense(layer: Any, activations: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A Dense layer as ``(weight (out, in), bias (out,))`` (a zero bias without one), checking its activation."""
    act = layer.activation.__name__
    if act not in activations:
        raise CheckpointError(
            f"Dense layer {layer.name!r} has activation {act!r}, expected one of {activations}: no vitlab equivalent"
        )
    kernel, *bias = (to_tensor(w) for w in layer.get_weights())
    return kernel.T, bias[0] if bias else torch.zeros(kernel.shape[1])


def read_norm(layer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """A LayerNormalization over the last axis as ``(gamma (D,), beta (D,))``, refusing any other."""
    axis = layer.axis if isinstance(layer.axis, int) else tuple(layer.axis)
    if not (layer.center and layer.scale) or getattr(layer, "rms_scaling", False) or axis not in (-1, 2, (-1,), (2,)):
        raise CheckpointError(
            f"LayerNormalization {layer.name!r} must normalise the last axis with center=True, "
            f"scale=True and no RMS scaling, as vitlab's LayerNorm does"
        )
    gamma, beta = layer.get_weights()
    return to_tensor(gamma), to_tensor(beta)


def self_attention_input(layer: Any, node: Any) -> Any:
    """The one tensor a MultiHeadAttention reads as query, key and value; refuses masks and cross-attention."""
    call = inspect.signature(layer.call).bind(*node.arguments.args, **node.arguments.kwargs).arguments
    query, value = call["query"], call["value"]
    key = call.get("key") if call.get("key") is not None else value
    if not (query is value is key):
        raise CheckpointError(
            f"MultiHeadAttention {layer.name!r} reads different query, key and value tensors: "
            f"vitlab's blocks use self-attention, layer(x, x)"
        )
    options = {
        k: call[k]
        for k in (
            "query_mask",
            "value_mask",
            "key_mask",
            "attention_mask",
            "return_attention_scores",
            "use_causal_mask",
        )
        if call.get(k) not in (None, False)
    }
    if options:
        raise CheckpointError(
            f"MultiHeadAttention {layer.name!r} is called with {', '.join(options)}: vitlab's "
            f"attention has no masks and returns no scores"
        )
    return query


def read_attention(layer: Any, dim: int) -> tuple[int, bool, StateDict]:
    """A MultiHeadAttention as the head count, whether it has biases, and fused ``qkv`` / ``proj`` weights."""
    cfg = layer.get_config()
    heads, key_dim = cfg["num_heads"], cfg["key_dim"]
    others = {k: cfg.get(k) for k in ("output_shape", "sliding_window", "use_gate") if cfg.get(k) not in (None, False)}
    if cfg.get("attention_axes") not in (None, (1,), [1]):  # (1,): the token axis of (B, N, D)
        others["attention_axes"] = cfg["attention_axes"]
    if heads * key_dim != dim or cfg.get("value_dim") not in (None, key_dim) or others:
        given = "".join(f", {k}={v!r}" for k, v in others.items())
        raise CheckpointError(
            f"MultiHeadAttention {layer.name!r} has num_heads={heads}, key_dim={key_dim}, "
            f"value_dim={cfg.get('value_dim')}{given}: vitlab needs num_heads * key_dim = width "
            f"{dim}, value_dim = key_dim and none of the other options"
        )
    bias = bool(cfg["use_bias"])
    parts = [
        [to_tensor(w) for w in dense.get_weights()]
        for dense in (layer.query_dense, layer.key_dense, layer.value_dense, layer.output_dense)
    ]
    state = {
        "attn.qkv.weight": torch.cat([p[0].reshape(dim, dim).T for p in parts[:3]]),  # (D, H, d) each
        "attn.proj.weight": parts[3][0].reshape(dim, dim).T,  # (H, d, D)
        "attn.proj.bias": parts[3][1] if bias else torch.zeros(dim),
    }
    if bias:
        state["attn.qkv.bias"] = torch.cat([p[1].reshape(dim) for p in parts[:3]])
    return heads, bias, state
