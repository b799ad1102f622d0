"""A functional Keras model's graph, read backwards: which operation made a tensor, what a tensor depends on,
and where a residual ``x + branch(x)`` is. Operations are named in messages by :func:`op_name`.

Keras, imported only to run a model vitlab was given, on a backend vitlab chooses.

Keras 3 picks its backend when it is first imported (``KERAS_BACKEND``, else ``~/.keras/keras.json``, else
TensorFlow); :func:`import_keras` sets ``torch``, which vitlab always has, unless ``KERAS_BACKEND`` names
another. :func:`to_numpy` reads a Keras tensor or variable as a float32 array.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from ...errors import CheckpointError, require

IDENTITIES = ("Dropout", "Identity")  # identity at inference


def op_name(op: Any) -> str:
    """``'name' (Class)``: how a message names a Keras operation."""
    return f"{op.name!r} ({type(op).__name__})"


def op_names(ops: list[Any]) -> str:
    """Several operations named as :func:`op_name` does, comma-separated."""
    return ", ".join(op_name(op) for op in ops)


def kind_of(op: Any) -> str:
    """The class name of a Keras built-in layer or operation, ``"custom"`` for anything else."""
    return type(op).__name__ if type(op).__module__.startswith("keras.") else "custom"


def is_symbolic(value: Any) -> bool:
    """Whether ``value`` is a tensor of the graph (not a constant an operation was called with)."""
    return hasattr(value, "_keras_history")


def leaves(obj: Any) -> Iterator[Any]:
    """The items of nested lists, tuples and dict values, depth first."""
    if isinstance(obj, (list, tuple)):
        for item in obj:
            yield from leaves(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from leaves(item)
    else:
        yield obj


class Graph:
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
            if kind_of(op) != "InputLayer" and dtype != "float32":
                raise CheckpointError(
                    f"layer {op_name(op)} computes in {dtype}: vitlab converts float32 Keras models; "
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
        while kind_of(op) in IDENTITIES:
            tensor = node.input_tensors[0]
            op, node = self.node(tensor)
        return tensor

    def producer(self, tensor: Any) -> tuple[Any, Any]:
        """``(operation, node)`` that produced ``tensor``, identities skipped."""
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
            if kind_of(op) == "InputLayer":
                continue
            if kind_of(op) not in IDENTITIES:
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
        if kind_of(op) != "Add":
            return None
        operands = list(leaves((node.arguments.args, node.arguments.kwargs)))
        if len(operands) != 2 or not all(is_symbolic(t) for t in operands):
            return None
        a, b = operands
        if self.depends(b, a):
            return a, b, op
        if self.depends(a, b):
            return b, a, op
        return None


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


def to_numpy(value: Any) -> np.ndarray:
    """A Keras tensor or variable (any shape) as a float32 array of the same shape."""
    keras = import_keras()
    return np.asarray(keras.ops.convert_to_numpy(value), dtype=np.float32)
