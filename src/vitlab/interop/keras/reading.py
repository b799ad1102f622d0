"""A Keras ViT read back from its output: the head (``[LN] -> pool -> [LN] -> [Dense]``) and the pre-norm
blocks (``x + MHA(LN(x))``, then ``x + Dense(Dense_gelu(LN(x)))``), into a :class:`Reading`: a vitlab state
dict, config fields and the :class:`Stage` s to check, in order.

One Keras layer's weights as vitlab's tensors: a Dense as ``(weight (out, in), bias (out,))``, a
LayerNormalization as ``(gamma (D,), beta (D,))``, a MultiHeadAttention as fused ``qkv`` ``(3D, D)`` and
``proj`` ``(D, D)`` weights; each refuses, by the layer's name, the options vitlab's layers do not have.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ...errors import CheckpointError
from ..keymaps import StateDict
from .graph import Graph, kind_of, op_name, op_names

_POOLS = {"GlobalAveragePooling1D": "mean", "GlobalMaxPooling1D": "max"}


@dataclass
class Stage:
    """Keras operations that compute one part of vitlab's ViT (``"input"``: the patch projection's
    input, ``"embedding"``, ``"block i"``, ``"head"``), ending at ``tensor``."""

    part: str
    ops: list[Any]
    tensor: Any


@dataclass
class Reading:
    """What the graph says: a vitlab state dict, config fields, and the stages to check, in order."""

    state: StateDict = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    stages: list[Stage] = field(default_factory=list)
    norms: list[Any] = field(default_factory=list)
    softmax: bool = False


def read_head(graph: Graph, out: Any, reading: Reading) -> Any:
    """``[LN] -> pool -> [LN] -> [Dense]`` back from the output; returns the tensor the head reads."""
    ops, state, tensor = [], reading.state, out
    op, node = graph.producer(tensor)
    if kind_of(op) == "Dense":
        state["head.weight"], state["head.bias"] = read_dense(op, ("softmax", "linear"))
        reading.softmax = op.activation.__name__ == "softmax"
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    fc_norm = kind_of(op) == "LayerNormalization"
    if fc_norm:
        state["fc_norm.weight"], state["fc_norm.bias"] = read_norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    cfg = op.get_config() if kind_of(op) in _POOLS else {}
    if cfg.get("data_format") != "channels_last" or cfg.get("keepdims"):
        raise CheckpointError(
            f"layer {op_name(op)} where the ViT pools its tokens: vitlab places GlobalAveragePooling1D "
            f"or GlobalMaxPooling1D (channels_last, keepdims=False) before the optional head Dense"
        )
    pool = _POOLS[kind_of(op)]
    ops.append(op)
    tensor = node.input_tensors[0]
    op, node = graph.producer(tensor)
    final_norm = kind_of(op) == "LayerNormalization"
    if final_norm and fc_norm:
        raise CheckpointError(
            f"LayerNormalizations {op.name!r} before the pooling and {ops[-2].name!r} after it: "
            f"vitlab's ViT normalises once, before pooling (final norm) or after it (fc_norm)"
        )
    if final_norm:
        state["norm.weight"], state["norm.bias"] = read_norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
    reading.fields.update(
        pool=pool,
        final_norm=final_norm or fc_norm,
        fc_norm=fc_norm,
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
    )
    reading.stages.append(Stage("head", ops[::-1], out))
    return tensor


def _read_branch(graph: Graph, stream: Any, branch: Any, add: Any) -> tuple[str, list[Any]]:
    """The layers of ``branch(stream)``, in order, as ``"attention"`` (LN -> MHA) or ``"mlp"``
    (LN -> Dense -> Dense)."""
    ops, tensor, start = [], branch, graph.skip(stream)
    while graph.skip(tensor) is not start:
        op, node = graph.producer(tensor)
        kind = kind_of(op)
        if kind == "MultiHeadAttention":
            tensor = self_attention_input(op, node)
        elif kind in ("LayerNormalization", "Dense"):
            tensor = node.input_tensors[0]
        else:
            raise CheckpointError(
                f"layer {op_name(op)} in the residual branch added by {add.name!r}: vitlab's blocks "
                f"add LayerNormalization -> MultiHeadAttention and LayerNormalization -> Dense -> "
                f"Dense"
            )
        ops.append(op)
    ops.reverse()
    kinds = [kind_of(op) for op in ops]
    if kinds == ["LayerNormalization", "MultiHeadAttention"]:
        return "attention", ops
    if kinds == ["LayerNormalization", "Dense", "Dense"]:
        return "mlp", ops
    raise CheckpointError(
        f"the residual branch {' -> '.join(kinds) or 'identity'} added by {add.name!r} is neither of "
        f"vitlab's: LayerNormalization -> MultiHeadAttention, LayerNormalization -> Dense -> Dense"
    )


def read_blocks(graph: Graph, tensor: Any, reading: Reading) -> Any:
    """Pre-norm blocks back from ``tensor``; returns the tensor that enters the first block."""
    units = []
    while (found := graph.residual(tensor)) is not None:
        stream, branch, add = found
        units.append((*_read_branch(graph, stream, branch, add), add, tensor))
        tensor = stream
    units.reverse()
    if not units:
        raise CheckpointError(
            f"layer {op_name(graph.producer(tensor)[0])} where the last block's residual Add should "
            f"be: vitlab's blocks are x + MultiHeadAttention(LayerNormalization(x)), then "
            f"x + Dense(Dense(LayerNormalization(x))) (a custom block layer is code vitlab cannot "
            f"read)"
        )
    dim, state, stages = tensor.shape[-1], reading.state, []
    heads, biases, hidden = set(), set(), set()
    for b in range((len(units) + 1) // 2):
        pair = units[2 * b : 2 * b + 2]
        if [kind for kind, *_ in pair] != ["attention", "mlp"]:
            layers = [op for _, ops, add, _ in pair for op in [*ops, add]]
            raise CheckpointError(
                f"the residual branches {op_names(layers)} do not form a block: vitlab's blocks add "
                f"an attention branch, then an MLP branch"
            )
        (_, (ln1, mha), add1, _), (_, (ln2, fc1, fc2), add2, out) = pair
        h, bias, weights = read_attention(mha, dim)
        heads.add(h)
        biases.add(bias)
        state.update({f"blocks.{b}.{k}": v for k, v in weights.items()})
        state[f"blocks.{b}.norm1.weight"], state[f"blocks.{b}.norm1.bias"] = read_norm(ln1)
        state[f"blocks.{b}.norm2.weight"], state[f"blocks.{b}.norm2.bias"] = read_norm(ln2)
        state[f"blocks.{b}.mlp.fc1.weight"], state[f"blocks.{b}.mlp.fc1.bias"] = read_dense(fc1, ("gelu",))
        state[f"blocks.{b}.mlp.fc2.weight"], state[f"blocks.{b}.mlp.fc2.bias"] = read_dense(fc2, ("linear",))
        hidden.add(state[f"blocks.{b}.mlp.fc1.weight"].shape[0])
        reading.norms += [ln1, ln2]
        stages.append(Stage(f"block {b}", [ln1, mha, add1, ln2, fc1, fc2, add2], out))
    if len(heads) > 1 or len(biases) > 1 or len(hidden) > 1:
        raise CheckpointError(
            f"blocks with different head counts {sorted(heads)}, attention biases or MLP widths "
            f"{sorted(hidden)}: vitlab's blocks are all alike"
        )
    reading.stages[:0] = stages
    reading.fields.update(depth=len(stages), num_heads=heads.pop(), qkv_bias=biases.pop(), mlp_ratio=hidden.pop() / dim)
    return tensor


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
