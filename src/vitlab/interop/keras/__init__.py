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

The reading is in parts: Keras and the graph (:mod:`~vitlab.interop.keras.graph`), one layer's weights
and the head and blocks back from the output (:mod:`~vitlab.interop.keras.reading`), the patch embedding
(:mod:`~vitlab.interop.keras.embedding`); this module checks the result and is the door.

keras is imported only to run the model it was given, through
:func:`~vitlab.interop.keras.graph.import_keras`, which chooses its backend: Keras 3 picks one when it is
first imported (``KERAS_BACKEND``, else ``~/.keras/keras.json``, else TensorFlow), and vitlab runs the
converted model on torch, which it always has.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ...errors import CheckpointError
from ...models.vit import VisionTransformer
from ...ops.patches import patchify, unpatchify
from ..state import model_from_state
from .embedding import read_embedding
from .graph import Graph, import_keras, op_names
from .reading import Reading, read_blocks, read_head

_TOLERANCE = 1e-4  # stage difference allowed, relative to its largest value
_PROBE_BATCH = 2
_TITLES = {"input": "patch projection's input", "embedding": "patch embedding", "head": "head"}


@torch.no_grad()
def _check(model: Any, vit: VisionTransformer, reading: Reading, projection: str) -> None:
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
                f"the Keras model's {_TITLES.get(stage.part, stage.part)} ({op_names(stage.ops)}) "
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
    graph, reading = Graph(model), Reading()
    tokens = read_blocks(graph, read_head(graph, model.outputs[0], reading), reading)
    projection = read_embedding(graph, tokens, reading, img_size, in_chans)
    eps = {layer.epsilon for layer in reading.norms}
    if len(eps) > 1:
        raise CheckpointError(f"LayerNormalizations of several epsilons {sorted(eps)}: vitlab uses one norm_eps")
    vit, _ = model_from_state(reading.state, class_token=False, norm_eps=eps.pop() if eps else 1e-6, **reading.fields)
    _check(model, vit, reading, projection)
    return vit
