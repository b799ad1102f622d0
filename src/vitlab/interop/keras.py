"""Keras ViTs -> vitlab: the textbook's model and the usual ways of writing it.

:func:`from_keras` walks a functional Keras 3 model's graph from its output back through each
operation's inbound node, and places every operation on a part of vitlab's ViT::

    input: images (None, H, W, C), or patch tokens (None, N, P*P*C) patchified before the model
    -> weightless reshapes -> patch projection      Dense on tokens, Conv2D(P, strides=P) on images,
                                                    or a custom layer holding one of them
    -> + positions (optional)                       a constant added in the graph (``Embedding(N, D)``
                                                    applied to ``arange(N)`` while the graph is built
                                                    is one), a Variable added, or a custom layer
                                                    holding an ``(N, D)`` weight or ``Embedding(N, D)``
    -> depth x [x + MHA(LN(x), LN(x)) ; x + Dense(Dense_gelu(LN(x)))]     Dropout is identity
    -> [LayerNormalization] -> GlobalAverage/MaxPooling1D -> [LayerNormalization] -> [Dense]

An operation that fits no part is refused by name. Custom layers run code vitlab cannot read, so
their weights are only a hypothesis: before returning, the converted model runs beside the Keras
model on a random batch and is compared stage by stage (the projection's input, the patch
embedding, each block, the head); the first stage that differs is refused, naming its layers.
A conversion that returns computes what the Keras model computes, to float tolerance.

keras is imported only to run the model it was given, through :func:`import_keras`, which chooses its
backend: Keras 3 picks one when it is first imported (``KERAS_BACKEND``, else ``~/.keras/keras.json``,
else TensorFlow), and vitlab runs the converted model on torch, which it always has.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ..errors import CheckpointError, require
from ..layers.patch_embed import linear_weight_to_conv
from ..models.vit import VisionTransformer
from ..ops.patches import _pair, patchify, unpatchify
from .keymaps import StateDict
from .state import model_from_state

_IDENTITIES = ("Dropout", "Identity")  # identity at inference
_PROJECTIONS = ("Dense", "Conv2D")
_POOLS = {"GlobalAveragePooling1D": "mean", "GlobalMaxPooling1D": "max"}
_CHANNELS = (1, 3)  # channel counts a token width is read with
_TOLERANCE = 1e-4  # stage difference allowed, relative to its largest value
_PROBE_BATCH = 2


def _name(op: Any) -> str:
    return f"{op.name!r} ({type(op).__name__})"


def _names(ops: list[Any]) -> str:
    return ", ".join(_name(op) for op in ops)


def _kind(op: Any) -> str:
    """The class name of a Keras built-in layer or operation, ``"custom"`` for anything else."""
    return type(op).__name__ if type(op).__module__.startswith("keras.") else "custom"


def _is_symbolic(value: Any) -> bool:
    return hasattr(value, "_keras_history")


def _leaves(obj: Any) -> Iterator[Any]:
    if isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _leaves(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _leaves(item)
    else:
        yield obj


# The Python module each Keras backend needs.
BACKEND_MODULES = {"tensorflow": "tensorflow", "jax": "jax", "torch": "torch", "numpy": "numpy", "openvino": "openvino"}


def import_keras() -> Any:
    """The ``keras`` module, its backend chosen by vitlab: ``torch`` unless ``KERAS_BACKEND`` names another
    (set for this process, so that Keras does not fall back to a TensorFlow vitlab does not need). A Keras
    already imported keeps its backend. A backend named in ``KERAS_BACKEND`` that is not installed is refused
    in one line, as is a missing Keras."""
    require("keras", "dev", "reading a .keras file")
    if "keras" not in sys.modules:
        backend = os.environ.setdefault("KERAS_BACKEND", "torch")
        module = BACKEND_MODULES.get(backend, backend)
        if importlib.util.find_spec(module) is None:
            raise CheckpointError(
                f"KERAS_BACKEND={backend} names a Keras backend whose module {module} is not installed: unset "
                f"KERAS_BACKEND (vitlab then runs Keras on torch) or install {module}"
            )
    import keras

    return keras


def _numpy(value: Any) -> np.ndarray:
    keras = import_keras()

    return np.asarray(keras.ops.convert_to_numpy(value), dtype=np.float32)


def _tensor(array: Any) -> torch.Tensor:
    return torch.from_numpy(np.array(array, dtype=np.float32))


class _Graph:
    """The inbound nodes of a functional model, read backwards from a tensor."""

    def __init__(self, model: Any) -> None:
        if not hasattr(model, "operations") or not hasattr(model, "outputs"):
            raise CheckpointError(
                f"{type(model).__name__} is not a functional Keras model: vitlab reads the graph of "
                f"keras.Model(inputs, outputs); rebuild a subclassed model functionally"
            )
        if len(model.inputs) != 1 or len(model.outputs) != 1:
            raise CheckpointError(
                f"model {model.name!r} has {len(model.inputs)} inputs and {len(model.outputs)} "
                f"outputs: vitlab converts a ViT with one input (images or patch tokens) and one "
                f"output"
            )
        for op in model.operations:
            dtype = getattr(op, "compute_dtype", "float32")
            if _kind(op) != "InputLayer" and dtype != "float32":
                raise CheckpointError(
                    f"layer {_name(op)} computes in {dtype}: vitlab converts float32 Keras models; "
                    f"rebuild it under the 'float32' dtype policy"
                )
        self.input = model.inputs[0]
        self.order = {id(op): i for i, op in enumerate(model.operations)}

    @staticmethod
    def node(tensor: Any) -> tuple[Any, Any]:
        """``(operation, node)`` that produced ``tensor``."""
        history = tensor._keras_history
        return history.operation, history.operation._inbound_nodes[history.node_index]

    def skip(self, tensor: Any) -> Any:
        """``tensor`` followed back past identities (Dropout)."""
        op, node = self.node(tensor)
        while _kind(op) in _IDENTITIES:
            tensor = node.input_tensors[0]
            op, node = self.node(tensor)
        return tensor

    def producer(self, tensor: Any) -> tuple[Any, Any]:
        return self.node(self.skip(tensor))

    def ancestors(self, tensor: Any) -> list[tuple[Any, Any]]:
        """Every ``(operation, node)`` that ``tensor`` depends on, in graph order, back to the input
        (InputLayer and identities left out)."""
        seen, found, todo = set(), [], [tensor]
        while todo:
            t = todo.pop()
            if id(t) in seen:
                continue
            seen.add(id(t))
            op, node = self.node(t)
            if _kind(op) == "InputLayer":
                continue
            if _kind(op) not in _IDENTITIES:
                found.append((op, node))
            todo.extend(node.input_tensors)
        unique = {id(op): (op, node) for op, node in found}
        return sorted(unique.values(), key=lambda pair: self.order[id(pair[0])])

    def depends(self, tensor: Any, on: Any) -> bool:
        """Whether ``tensor`` is computed from ``on``."""
        seen, todo = set(), [tensor]
        while todo:
            t = todo.pop()
            if t is on:
                return True
            if id(t) not in seen and t is not self.input:
                seen.add(id(t))
                todo.extend(self.node(t)[1].input_tensors)
        return False

    def residual(self, tensor: Any) -> tuple[Any, Any, Any] | None:
        """``(stream, branch, add)`` when ``tensor = stream + branch(stream)``, else ``None``."""
        op, node = self.producer(tensor)
        if _kind(op) != "Add":
            return None
        operands = list(_leaves((node.arguments.args, node.arguments.kwargs)))
        if len(operands) != 2 or not all(_is_symbolic(t) for t in operands):
            return None
        a, b = operands
        if self.depends(b, a):
            return a, b, op
        if self.depends(a, b):
            return b, a, op
        return None


def _dense(layer: Any, activations: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """A Dense layer as ``(weight (out, in), bias (out,))`` (a zero bias without one), checking its activation."""
    act = layer.activation.__name__
    if act not in activations:
        raise CheckpointError(
            f"Dense layer {layer.name!r} has activation {act!r}, expected one of {activations}: no vitlab equivalent"
        )
    kernel, *bias = (_tensor(w) for w in layer.get_weights())
    return kernel.T, bias[0] if bias else torch.zeros(kernel.shape[1])


def _norm(layer: Any) -> tuple[torch.Tensor, torch.Tensor]:
    axis = layer.axis if isinstance(layer.axis, int) else tuple(layer.axis)
    if not (layer.center and layer.scale) or getattr(layer, "rms_scaling", False) or axis not in (-1, 2, (-1,), (2,)):
        raise CheckpointError(
            f"LayerNormalization {layer.name!r} must normalise the last axis with center=True, "
            f"scale=True and no RMS scaling, as vitlab's LayerNorm does"
        )
    gamma, beta = layer.get_weights()
    return _tensor(gamma), _tensor(beta)


def _self_attention_input(layer: Any, node: Any) -> Any:
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


def _attention(layer: Any, dim: int) -> tuple[int, bool, StateDict]:
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
        [_tensor(w) for w in dense.get_weights()]
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


@dataclass
class _Stage:
    """Keras operations that compute one part of vitlab's ViT (``"input"``: the patch projection's
    input, ``"embedding"``, ``"block i"``, ``"head"``), ending at ``tensor``."""

    part: str
    ops: list[Any]
    tensor: Any


@dataclass
class _Reading:
    """What the graph says: a vitlab state dict, config fields, and the stages to check, in order."""

    state: StateDict = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    stages: list[_Stage] = field(default_factory=list)
    norms: list[Any] = field(default_factory=list)
    softmax: bool = False


def _read_head(graph: _Graph, out: Any, reading: _Reading) -> Any:
    """``[LN] -> pool -> [LN] -> [Dense]`` back from the output; returns the tensor the head reads."""
    ops, state, tensor = [], reading.state, out
    op, node = graph.producer(tensor)
    if _kind(op) == "Dense":
        state["head.weight"], state["head.bias"] = _dense(op, ("softmax", "linear"))
        reading.softmax = op.activation.__name__ == "softmax"
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    fc_norm = _kind(op) == "LayerNormalization"
    if fc_norm:
        state["fc_norm.weight"], state["fc_norm.bias"] = _norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
        op, node = graph.producer(tensor)
    cfg = op.get_config() if _kind(op) in _POOLS else {}
    if cfg.get("data_format") != "channels_last" or cfg.get("keepdims"):
        raise CheckpointError(
            f"layer {_name(op)} where the ViT pools its tokens: vitlab places GlobalAveragePooling1D "
            f"or GlobalMaxPooling1D (channels_last, keepdims=False) before the optional head Dense"
        )
    pool = _POOLS[_kind(op)]
    ops.append(op)
    tensor = node.input_tensors[0]
    op, node = graph.producer(tensor)
    final_norm = _kind(op) == "LayerNormalization"
    if final_norm and fc_norm:
        raise CheckpointError(
            f"LayerNormalizations {op.name!r} before the pooling and {ops[-2].name!r} after it: "
            f"vitlab's ViT normalises once, before pooling (final norm) or after it (fc_norm)"
        )
    if final_norm:
        state["norm.weight"], state["norm.bias"] = _norm(op)
        reading.norms.append(op)
        ops.append(op)
        tensor = node.input_tensors[0]
    reading.fields.update(
        pool=pool,
        final_norm=final_norm or fc_norm,
        fc_norm=fc_norm,
        num_classes=state["head.weight"].shape[0] if "head.weight" in state else 0,
    )
    reading.stages.append(_Stage("head", ops[::-1], out))
    return tensor


def _read_branch(graph: _Graph, stream: Any, branch: Any, add: Any) -> tuple[str, list[Any]]:
    """The layers of ``branch(stream)``, in order, as ``"attention"`` (LN -> MHA) or ``"mlp"``
    (LN -> Dense -> Dense)."""
    ops, tensor, start = [], branch, graph.skip(stream)
    while graph.skip(tensor) is not start:
        op, node = graph.producer(tensor)
        kind = _kind(op)
        if kind == "MultiHeadAttention":
            tensor = _self_attention_input(op, node)
        elif kind in ("LayerNormalization", "Dense"):
            tensor = node.input_tensors[0]
        else:
            raise CheckpointError(
                f"layer {_name(op)} in the residual branch added by {add.name!r}: vitlab's blocks "
                f"add LayerNormalization -> MultiHeadAttention and LayerNormalization -> Dense -> "
                f"Dense"
            )
        ops.append(op)
    ops.reverse()
    kinds = [_kind(op) for op in ops]
    if kinds == ["LayerNormalization", "MultiHeadAttention"]:
        return "attention", ops
    if kinds == ["LayerNormalization", "Dense", "Dense"]:
        return "mlp", ops
    raise CheckpointError(
        f"the residual branch {' -> '.join(kinds) or 'identity'} added by {add.name!r} is neither of "
        f"vitlab's: LayerNormalization -> MultiHeadAttention, LayerNormalization -> Dense -> Dense"
    )


def _read_blocks(graph: _Graph, tensor: Any, reading: _Reading) -> Any:
    """Pre-norm blocks back from ``tensor``; returns the tensor that enters the first block."""
    units = []
    while (found := graph.residual(tensor)) is not None:
        stream, branch, add = found
        units.append((*_read_branch(graph, stream, branch, add), add, tensor))
        tensor = stream
    units.reverse()
    if not units:
        raise CheckpointError(
            f"layer {_name(graph.producer(tensor)[0])} where the last block's residual Add should "
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
                f"the residual branches {_names(layers)} do not form a block: vitlab's blocks add "
                f"an attention branch, then an MLP branch"
            )
        (_, (ln1, mha), add1, _), (_, (ln2, fc1, fc2), add2, out) = pair
        h, bias, weights = _attention(mha, dim)
        heads.add(h)
        biases.add(bias)
        state.update({f"blocks.{b}.{k}": v for k, v in weights.items()})
        state[f"blocks.{b}.norm1.weight"], state[f"blocks.{b}.norm1.bias"] = _norm(ln1)
        state[f"blocks.{b}.norm2.weight"], state[f"blocks.{b}.norm2.bias"] = _norm(ln2)
        state[f"blocks.{b}.mlp.fc1.weight"], state[f"blocks.{b}.mlp.fc1.bias"] = _dense(fc1, ("gelu",))
        state[f"blocks.{b}.mlp.fc2.weight"], state[f"blocks.{b}.mlp.fc2.bias"] = _dense(fc2, ("linear",))
        hidden.add(state[f"blocks.{b}.mlp.fc1.weight"].shape[0])
        reading.norms += [ln1, ln2]
        stages.append(_Stage(f"block {b}", [ln1, mha, add1, ln2, fc1, fc2, add2], out))
    if len(heads) > 1 or len(biases) > 1 or len(hidden) > 1:
        raise CheckpointError(
            f"blocks with different head counts {sorted(heads)}, attention biases or MLP widths "
            f"{sorted(hidden)}: vitlab's blocks are all alike"
        )
    reading.stages[:0] = stages
    reading.fields.update(depth=len(stages), num_heads=heads.pop(), qkv_bias=biases.pop(), mlp_ratio=hidden.pop() / dim)
    return tensor


def _held(op: Any, node: Any) -> tuple[list[Any], list[Any]]:
    """The patch projections (Dense / Conv2D layers) and position tables an operation of the
    embedding stage holds."""
    kind = _kind(op)
    if kind in _PROJECTIONS:
        return [op], []
    if kind == "Add":
        return [], [_numpy(c) for c in _leaves((node.arguments.args, node.arguments.kwargs)) if not _is_symbolic(c)]
    if kind == "custom":
        return _custom_held(op)
    if op.weights:
        raise CheckpointError(
            f"layer {_name(op)} before the first block: vitlab's patch embedding holds a projection "
            f"(Dense or Conv2D) and positions only"
        )
    return [], []


def _custom_held(layer: Any) -> tuple[list[Any], list[Any]]:
    """What a custom layer holds: Dense / Conv2D sublayers (projections), Embedding sublayers and
    its own weights (position tables); any other weighted sublayer is refused."""
    projections: list[Any] = []
    positions: list[Any] = []
    inner: set[int] = set()
    for sub in layer._flatten_layers(include_self=False, recursive=False):
        inner.update(id(w) for w in sub.weights)
        kind = _kind(sub)
        if kind in _PROJECTIONS:
            projections.append(sub)
        elif kind == "Embedding":
            positions.append(sub.get_weights()[0])
        elif kind == "custom":
            p, q = _custom_held(sub)
            projections += p
            positions += q
        elif sub.weights:
            raise CheckpointError(
                f"custom layer {_name(layer)} holds {_name(sub)}: vitlab reads custom layers that "
                f"hold a patch projection (Dense or Conv2D) and positions (an (N, D) weight or an "
                f"Embedding) only; build blocks from keras.layers as the textbook does"
            )
    positions += [_numpy(w) for w in layer.weights if id(w) not in inner]
    return projections, positions


def _conv_patch(layer: Any) -> int:
    """The patch size of a Conv2D that cuts and projects patches, refusing any other convolution."""
    cfg = layer.get_config()
    p = cfg["kernel_size"][0]
    wanted = {
        "kernel_size": (p, p),
        "strides": (p, p),
        "padding": "valid",
        "data_format": "channels_last",
        "dilation_rate": (1, 1),
        "groups": 1,
        "activation": "linear",
    }
    wrong = {k: cfg[k] for k, v in wanted.items() if (tuple(cfg[k]) if isinstance(v, tuple) else cfg[k]) != v}
    if wrong:
        raise CheckpointError(
            f"Conv2D {layer.name!r} has {', '.join(f'{k}={v!r}' for k, v in wrong.items())}: a "
            f"patch projection is Conv2D(D, P, strides=P, padding='valid') on channels-last images, "
            f"no activation"
        )
    return p


def _token_geometry(n: int, width: int, img_size: Any, in_chans: int | None) -> tuple[tuple[int, int], int, int]:
    """``(img_size, patch, in_chans)`` for ``n`` tokens of ``width = P*P*C`` values."""
    if img_size is not None:
        h, w = _pair(img_size, "img_size")
        p = math.isqrt(h * w // n)
        c = width // (p * p) if p else 0
        if p * p * n != h * w or h % p or w % p or p * p * c != width or in_chans not in (None, c):
            given = f" with {in_chans} channels" if in_chans else ""
            raise CheckpointError(
                f"img_size={h}x{w} does not cut into {n} square patches of {width} values"
                f"{given}: pass the size the tokens came from"
            )
        return (h, w), p, c
    channels = (in_chans,) if in_chans is not None else _CHANNELS
    fits = [(math.isqrt(width // c), c) for c in channels if math.isqrt(width // c) ** 2 * c == width]
    side = math.isqrt(n)
    if len(fits) != 1 or side * side != n:
        why = f"{width} is not P*P*C for C in {channels}" if not fits else f"{n} tokens are not a square grid"
        raise CheckpointError(
            f"the Keras model takes {n} tokens of {width} values and the image they came from is not "
            f"certain ({why}): pass img_size=(H, W) and in_chans=C to from_keras"
        )
    p, c = fits[0]
    return (side * p, side * p), p, c


def _read_embedding(graph: _Graph, tokens: Any, reading: _Reading, img_size: Any, in_chans: int | None) -> str:
    """The patch projection and positions before the first block; returns the projection's kind."""
    ops = graph.ancestors(tokens)
    projections, positions = [], []
    for op, node in ops:
        p, q = _held(op, node)
        projections += [(layer, op, node) for layer in p]
        positions += [(table, op) for table in q]
    if len(projections) != 1:
        found = _names([p[0] for p in projections]) or "none"
        raise CheckpointError(
            f"{len(projections)} patch projections ({found}) between the input and the first "
            f"block: vitlab's ViT projects patches once, with a Dense on patch tokens or a "
            f"Conv2D(D, P, strides=P) on images"
        )
    if len(positions) > 1:
        raise CheckpointError(
            f"{len(positions)} position tables ({_names([p[1] for p in positions])}) before the "
            f"first block: vitlab's ViT adds one"
        )
    projection, _, node = projections[0]
    n, dim = tokens.shape[1:]
    shape = tuple(graph.input.shape[1:])
    if len(shape) == 3:
        if _kind(projection) == "Conv2D":
            patch, chans = _conv_patch(projection), projection.kernel.shape[2]
        else:
            chans = shape[2]
            patch = math.isqrt(projection.kernel.shape[0] // chans)
        size = tuple(shape[:2])
        if (
            (img_size is not None and _pair(img_size, "img_size") != size)
            or in_chans not in (None, shape[2])
            or size[0] % patch
            or size[1] % patch
            or chans != shape[2]
        ):
            raise CheckpointError(
                f"the Keras model takes {size[0]}x{size[1]} images of {shape[2]} channels, cut by "
                f"{_name(projection)} into {patch}x{patch} patches of {chans} channels: vitlab needs "
                f"sides that are multiples of the patch (and no other img_size / in_chans)"
            )
    elif len(shape) == 2 and _kind(projection) == "Dense":
        size, patch, chans = _token_geometry(n, projection.kernel.shape[0], img_size, in_chans)
    else:
        raise CheckpointError(
            f"input of shape (None, {', '.join(map(str, shape))}) with {_name(projection)}: vitlab "
            f"reads images (None, H, W, C) or patch tokens (None, N, P*P*C)"
        )
    if _kind(projection) == "Conv2D":
        kernel = _tensor(_numpy(projection.kernel)).permute(3, 2, 0, 1)  # (P, P, C, D) -> (D, C, P, P)
        bias = _tensor(_numpy(projection.bias)) if projection.use_bias else torch.zeros(dim)
    else:
        weight, bias = _dense(projection, ("linear",))
        if weight.shape[1] != patch * patch * chans:
            raise CheckpointError(
                f"the patch Dense {projection.name!r} takes {weight.shape[1]} inputs, not P*P*C = "
                f"{patch * patch * chans}"
            )
        kernel = linear_weight_to_conv(weight, patch, chans)
    reading.state["patch_embed.proj.weight"], reading.state["patch_embed.proj.bias"] = kernel, bias
    if positions:
        table, holder = positions[0]
        if table.shape not in ((n, dim), (1, n, dim)):
            raise CheckpointError(
                f"{_name(holder)} adds a table of shape {table.shape} before the first block, not "
                f"the ({n}, {dim}) positions of {n} tokens of width {dim}"
            )
        reading.state["pos_embed.weight"] = _tensor(table).reshape(1, n, dim)
    reading.fields.update(
        img_size=size, patch_size=patch, in_chans=chans, embed_dim=dim, pos_embed="learned" if positions else "none"
    )
    projection_input = node.input_tensors[0]
    before = graph.ancestors(projection_input)
    kept = {id(op) for op, _ in before}
    reading.stages[:0] = ([_Stage("input", [op for op, _ in before], projection_input)] if before else []) + [
        _Stage("embedding", [op for op, _ in ops if id(op) not in kept], tokens)
    ]
    return _kind(projection)


_TITLES = {"input": "patch projection's input", "embedding": "patch embedding", "head": "head"}


@torch.no_grad()
def _check(model: Any, vit: VisionTransformer, reading: _Reading, projection: str) -> None:
    """Run both models on a random batch and refuse the first stage whose outputs differ."""
    keras = import_keras()

    rng = np.random.default_rng(0)
    cfg, shape = vit.config, (_PROBE_BATCH, *model.inputs[0].shape[1:])
    source = rng.standard_normal(shape).astype(np.float32)
    if len(shape) == 3:  # patch tokens
        images = torch.as_tensor(unpatchify(torch.from_numpy(source), cfg.patch_size, cfg.grid))
    else:
        images = torch.from_numpy(source).permute(0, 3, 1, 2)
    x, grid = vit.embed(images)
    expected = {
        "input": torch.as_tensor(patchify(images, cfg.patch_size))
        if projection == "Dense"
        else images.permute(0, 2, 3, 1),
        "embedding": x,
    }
    for b, block in enumerate(vit.blocks):
        x = expected[f"block {b}"] = block(x, None, grid)
    logits = vit(images)
    expected["head"] = logits.softmax(-1) if reading.softmax else logits
    outputs = keras.Model(model.inputs, [s.tensor for s in reading.stages]).predict(source, verbose=0)
    for stage, got in zip(reading.stages, outputs):
        got, want = np.asarray(got), expected[stage.part].numpy()
        error = float(np.abs(got - want).max()) if got.shape == want.shape else math.inf
        if error > _TOLERANCE * max(1.0, float(np.abs(want).max())):
            advice = (
                "vitlab.patchify cuts patches in raster order, each flattened row, column, channel"
                if stage.part == "input"
                else "build them from keras.layers as the textbook does"
            )
            raise CheckpointError(
                f"the Keras model's {_TITLES.get(stage.part, stage.part)} ({_names(stage.ops)}) "
                f"differs from what vitlab reads there by {error:.3g} on a random batch: vitlab "
                f"cannot tell what these layers compute; {advice}"
            )


def from_keras(
    model: Any, img_size: int | tuple[int, int] | None = None, in_chans: int | None = None
) -> VisionTransformer:
    """A vitlab :class:`VisionTransformer` computing what a Keras ViT computes (see the module docstring).

    Args:
        model: a functional Keras 3 model taking images ``(None, H, W, C)`` or patch tokens
            ``(None, N, P*P*C)`` (the textbook's ``keras.Input((16, 49))``).
        img_size, in_chans: the images a token-input model's tokens came from; needed only when
            ``N`` is not a square grid or ``P*P*C`` is not a square times 1 or 3 channels.

    Returns:
        A model in eval mode taking images ``(B, C, H, W)``. For an image-input Keras model,
        ``softmax(model(images))`` equals Keras on ``images.permute(0, 2, 3, 1)``; for a token-input
        one, Keras on ``vitlab.patchify(images, P)`` (a linear head's output equals the logits).

    Raises:
        CheckpointError: naming the first layer (or stage of layers) vitlab cannot place exactly.
    """
    graph, reading = _Graph(model), _Reading()
    tokens = _read_blocks(graph, _read_head(graph, model.outputs[0], reading), reading)
    projection = _read_embedding(graph, tokens, reading, img_size, in_chans)
    eps = {layer.epsilon for layer in reading.norms}
    if len(eps) > 1:
        raise CheckpointError(f"LayerNormalizations of several epsilons {sorted(eps)}: vitlab uses one norm_eps")
    vit, _ = model_from_state(reading.state, class_token=False, norm_eps=eps.pop() if eps else 1e-6, **reading.fields)
    _check(model, vit, reading, projection)
    return vit
