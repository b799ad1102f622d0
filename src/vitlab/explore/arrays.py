"""Tensors on the wire: ``{"shape": [...], "data": base64 of little-endian float32}``.

The front end decodes ``data`` into a ``Float32Array`` and draws it; it never computes a value.
float32 keeps the payload small (a 224x224x3 image is 600 kB) and exact for everything vitlab
computes in float32.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import torch

Encoded = dict[str, Any]


def encode_array(values: torch.Tensor | np.ndarray) -> Encoded:
    """Any numeric tensor or array -> ``{"shape": [...], "data": base64 float32 little-endian}``."""
    array = values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values)
    flat = np.ascontiguousarray(array, dtype="<f4")
    return {"shape": list(flat.shape), "data": base64.b64encode(flat.tobytes()).decode("ascii")}


def decode_array(encoded: Encoded) -> np.ndarray:
    """The inverse of :func:`encode_array`: a float32 array of the encoded shape."""
    raw = base64.b64decode(encoded["data"])
    return np.frombuffer(raw, dtype="<f4").reshape(encoded["shape"])
