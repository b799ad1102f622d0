"""The textbook's Keras ViT -> vitlab.

The listing's model, for images ``(B, H, W, C)``::

    patchify (reshape/permute) -> Dense(D) -> + learned positions (N, D)
    -> depth x [LN -> MultiHeadAttention -> Add -> LN -> Dense(hidden, gelu) -> Dense(D) -> Add]
    -> LayerNormalization -> GlobalAveragePooling1D -> Dense(classes, softmax)

:func:`from_keras` walks ``model.layers`` (in the order the listing builds them) by class name
and reads weights with ``get_weights()``, so it runs on any Keras 3 backend and never imports
keras. The position table may come from any layer holding a single ``(N, D)`` weight (an
``Embedding`` or a small custom layer).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ..layers.patch_embed import linear_weight_to_conv
from ..models.vit import VisionTransformer
from .keymaps import StateDict
from .state import model_from_state

_POOLS = {"GlobalAveragePooling1D": "mean", "GlobalMaxPooling1D": "max"}


def _tensor(array: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=np.float32))


def _dense(layer: Any, activations: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A Dense layer as ``(weight (out, in), bias (out,))``, checking its activation."""
    act = layer.activation.__name__
    if act not in activations:
        raise ValueError(f"Dense layer {layer.name!r} has activation {act!r}, expected one of {activations}: "
                         f"no vitlab equivalent")
    if not layer.use_bias:
        raise ValueError(f"Dense layer {layer.name!r} has no bias; vitlab's linear layers all have one")
    kernel, bias = layer.get_weights()
    return _tensor(kernel).T, _tensor(bias)


def _norm(layer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not (layer.center and layer.scale) or getattr(layer, "rms_scaling", False):
        raise ValueError(f"LayerNormalization {layer.name!r} must have center=True, scale=True and no RMS scaling")
    gamma, beta = layer.get_weights()
    return _tensor(gamma), _tensor(beta)


def _attention(layer: Any, dim: int) -> tuple[int, dict[str, torch.Tensor]]:
    """A MultiHeadAttention as the head count and fused ``qkv`` / ``proj`` weights."""
    heads, key_dim = layer.num_heads, layer.key_dim
    if heads * key_dim != dim or layer.value_dim != key_dim or not layer.use_bias:
        raise ValueError(f"MultiHeadAttention {layer.name!r} has num_heads={heads}, key_dim={key_dim}, value_dim="
                         f"{layer.value_dim}, use_bias={layer.use_bias}: vitlab needs num_heads * key_dim = width "
                         f"{dim}, value_dim = key_dim and biases")
    q, k, v = ([_tensor(w) for w in dense.get_weights()]
               for dense in (layer.query_dense, layer.key_dense, layer.value_dense))
    out_kernel, out_bias = (_tensor(w) for w in layer.output_dense.get_weights())
    return heads, {
        "attn.qkv.weight": torch.cat([kernel.reshape(dim, dim).T for kernel, _ in (q, k, v)]),  # (D, H, d) each
        "attn.qkv.bias": torch.cat([bias.reshape(dim) for _, bias in (q, k, v)]),
        "attn.proj.weight": out_kernel.reshape(dim, dim).T,                                     # (H, d, D)
        "attn.proj.bias": out_bias}


def from_keras(model: Any) -> VisionTransformer:
    """A vitlab :class:`VisionTransformer` computing the textbook's Keras ViT.

    Args:
        model: the Keras 3 model built as the listing shows, input ``(None, H, W, C)``, patches
            flattened row, column, channel (as the listing's ``patchify``).

    Returns:
        A model in eval mode whose ``softmax(model(images (B, C, H, W)))`` equals the Keras
        model's output on ``images.permute(0, 2, 3, 1)`` (a linear head's output equals the logits).
    """
    shape = model.input_shape
    if not (isinstance(shape, tuple) and len(shape) == 4):
        raise ValueError(f"expected one image input (None, H, W, C), got input_shape {shape}")
    _, height, width, in_chans = shape
    dense, norms, attention, pools, positions = [], [], [], [], []
    for layer in model.layers:
        kind, weights = type(layer).__name__, layer.get_weights()
        if kind == "Dense":
            dense.append(layer)
        elif kind == "LayerNormalization":
            norms.append(layer)
        elif kind == "MultiHeadAttention":
            attention.append(layer)
        elif kind in _POOLS:
            pools.append(_POOLS[kind])
        elif len(weights) == 1 and weights[0].ndim == 2:
            positions.append(weights[0])
        elif weights:
            raise ValueError(f"layer {layer.name!r} ({kind}) holds weights vitlab cannot place")
    depth = len(attention)
    if depth == 0:
        raise ValueError(f"model {model.name!r} has no MultiHeadAttention layer: it is not the listing's ViT")
    if (len(dense), len(norms), len(pools)) != (2 * depth + 2, 2 * depth + 1, 1) or len(positions) > 1:
        raise ValueError(f"found {len(dense)} Dense, {len(norms)} LayerNormalization, {depth} MultiHeadAttention, "
                         f"{len(pools)} global pooling and {len(positions)} position layers; the listing's ViT of "
                         f"depth {depth} has {2 * depth + 2}, {2 * depth + 1}, {depth}, 1 and 1 (or 0)")
    eps = {layer.epsilon for layer in norms}
    if len(eps) > 1:
        raise ValueError(f"LayerNormalizations of several epsilons {sorted(eps)}: vitlab uses one norm_eps")

    patch_weight, patch_bias = _dense(dense[0], ("linear",))
    dim, patch_inputs = patch_weight.shape
    patch = math.isqrt(patch_inputs // in_chans)
    if patch * patch * in_chans != patch_inputs:
        raise ValueError(f"the patch Dense takes {patch_inputs} inputs, not P*P*C for C={in_chans} channels")
    state: StateDict = {"patch_embed.proj.weight": linear_weight_to_conv(patch_weight, patch, in_chans),
                        "patch_embed.proj.bias": patch_bias}
    if positions:
        state["pos_embed.weight"] = _tensor(positions[0])[None]
    for i, mha in enumerate(attention):
        heads, weights = _attention(mha, dim)
        state.update({f"blocks.{i}.{k}": v for k, v in weights.items()})
        for j, norm in enumerate(norms[2 * i:2 * i + 2], start=1):
            state[f"blocks.{i}.norm{j}.weight"], state[f"blocks.{i}.norm{j}.bias"] = _norm(norm)
        state[f"blocks.{i}.mlp.fc1.weight"], state[f"blocks.{i}.mlp.fc1.bias"] = _dense(dense[1 + 2 * i], ("gelu",))
        state[f"blocks.{i}.mlp.fc2.weight"], state[f"blocks.{i}.mlp.fc2.bias"] = _dense(dense[2 + 2 * i], ("linear",))
    state["norm.weight"], state["norm.bias"] = _norm(norms[-1])
    state["head.weight"], state["head.bias"] = _dense(dense[-1], ("softmax", "linear"))
    vit, _ = model_from_state(
        state, img_size=(height, width), patch_size=patch, in_chans=in_chans,
        num_classes=state["head.weight"].shape[0], embed_dim=dim, depth=depth, num_heads=heads,
        mlp_ratio=state["blocks.0.mlp.fc1.weight"].shape[0] / dim, qkv_bias=True,
        pos_embed="learned" if positions else "none", pool=pools[0], class_token=False, fc_norm=False,
        norm_eps=eps.pop())
    return vit
