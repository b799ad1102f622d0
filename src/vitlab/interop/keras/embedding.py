"""A Keras ViT's patch embedding: the one patch projection (a Dense on patch tokens ``(None, N, P*P*C)``, a
``Conv2D(D, P, strides=P)`` on images ``(None, H, W, C)``, or a custom layer holding one) and the optional
``(N, D)`` positions before the first block, with the image size, patch and channels they imply."""

from __future__ import annotations

import math
from typing import Any

import torch

from ...errors import CheckpointError
from ...layers.patch_embed import linear_weight_to_conv
from ...ops.patches import _pair
from .graph import Graph, is_symbolic, kind_of, leaves, op_name, op_names, to_numpy
from .reading import Reading, Stage, read_dense, to_tensor

_PROJECTIONS = ("Dense", "Conv2D")
_CHANNELS = (1, 3)  # channel counts a token width is read with


def _held(op: Any, node: Any) -> tuple[list[Any], list[Any]]:
    """The patch projections (Dense / Conv2D layers) and position tables an operation of the
    embedding stage holds."""
    kind = kind_of(op)
    if kind in _PROJECTIONS:
        return [op], []
    if kind == "Add":
        return [], [to_numpy(c) for c in leaves((node.arguments.args, node.arguments.kwargs)) if not is_symbolic(c)]
    if kind == "custom":
        return _custom_held(op)
    if op.weights:
        raise CheckpointError(
            f"layer {op_name(op)} before the first block: vitlab's patch embedding holds a projection "
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
        kind = kind_of(sub)
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
                f"custom layer {op_name(layer)} holds {op_name(sub)}: vitlab reads custom layers that "
                f"hold a patch projection (Dense or Conv2D) and positions (an (N, D) weight or an "
                f"Embedding) only; build blocks from keras.layers as the textbook does"
            )
    positions += [to_numpy(w) for w in layer.weights if id(w) not in inner]
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


def _image_geometry(
    projection: Any, shape: tuple[int, ...], img_size: Any, in_chans: int | None
) -> tuple[tuple[int, int], int, int]:
    """``(img_size, patch, in_chans)`` of images ``shape = (H, W, C)`` cut by ``projection`` (a Conv2D, or a
    Dense on patches flattened inside the model), refusing sides the patch does not divide."""
    if kind_of(projection) == "Conv2D":
        patch, chans = _conv_patch(projection), projection.kernel.shape[2]
    else:
        chans = shape[2]
        patch = math.isqrt(projection.kernel.shape[0] // chans)
    size = (shape[0], shape[1])
    if (
        (img_size is not None and _pair(img_size, "img_size") != size)
        or in_chans not in (None, shape[2])
        or size[0] % patch
        or size[1] % patch
        or chans != shape[2]
    ):
        raise CheckpointError(
            f"the Keras model takes {size[0]}x{size[1]} images of {shape[2]} channels, cut by "
            f"{op_name(projection)} into {patch}x{patch} patches of {chans} channels: vitlab needs "
            f"sides that are multiples of the patch (and no other img_size / in_chans)"
        )
    return size, patch, chans


def read_embedding(graph: Graph, tokens: Any, reading: Reading, img_size: Any, in_chans: int | None) -> str:
    """The patch projection and positions before the first block; returns the projection's kind."""
    ops = graph.ancestors(tokens)
    projections, positions = [], []
    for op, node in ops:
        p, q = _held(op, node)
        projections += [(layer, op, node) for layer in p]
        positions += [(table, op) for table in q]
    if len(projections) != 1:
        found = op_names([p[0] for p in projections]) or "none"
        raise CheckpointError(
            f"{len(projections)} patch projections ({found}) between the input and the first "
            f"block: vitlab's ViT projects patches once, with a Dense on patch tokens or a "
            f"Conv2D(D, P, strides=P) on images"
        )
    if len(positions) > 1:
        raise CheckpointError(
            f"{len(positions)} position tables ({op_names([p[1] for p in positions])}) before the "
            f"first block: vitlab's ViT adds one"
        )
    projection, _, node = projections[0]
    n, dim = tokens.shape[1:]
    shape = tuple(graph.input.shape[1:])
    if len(shape) == 3:
        size, patch, chans = _image_geometry(projection, shape, img_size, in_chans)
    elif len(shape) == 2 and kind_of(projection) == "Dense":
        size, patch, chans = _token_geometry(n, projection.kernel.shape[0], img_size, in_chans)
    else:
        raise CheckpointError(
            f"input of shape (None, {', '.join(map(str, shape))}) with {op_name(projection)}: vitlab "
            f"reads images (None, H, W, C) or patch tokens (None, N, P*P*C)"
        )
    if kind_of(projection) == "Conv2D":
        kernel = to_tensor(to_numpy(projection.kernel)).permute(3, 2, 0, 1)  # (P, P, C, D) -> (D, C, P, P)
        bias = to_tensor(to_numpy(projection.bias)) if projection.use_bias else torch.zeros(dim)
    else:
        weight, bias = read_dense(projection, ("linear",))
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
                f"{op_name(holder)} adds a table of shape {table.shape} before the first block, not "
                f"the ({n}, {dim}) positions of {n} tokens of width {dim}"
            )
        reading.state["pos_embed.weight"] = to_tensor(table).reshape(1, n, dim)
    reading.fields.update(
        img_size=size, patch_size=patch, in_chans=chans, embed_dim=dim, pos_embed="learned" if positions else "none"
    )
    projection_input = node.input_tensors[0]
    before = graph.ancestors(projection_input)
    kept = {id(op) for op, _ in before}
    reading.stages[:0] = ([Stage("input", [op for op, _ in before], projection_input)] if before else []) + [
        Stage("embedding", [op for op, _ in ops if id(op) not in kept], tokens)
    ]
    return kind_of(projection)
