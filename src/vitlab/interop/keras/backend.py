"""Keras, imported only to run a model vitlab was given, on a backend vitlab chooses.

Keras 3 picks its backend when it is first imported (``KERAS_BACKEND``, else ``~/.keras/keras.json``, else
TensorFlow); :func:`import_keras` sets ``torch``, which vitlab always has, unless ``KERAS_BACKEND`` names
another. :func:`to_numpy` reads a Keras tensor or variable as a float32 array.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

import numpy as np

from ..errors import CheckpointError, require

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
