"""vitlab: Vision Transformers you can understand, train, compare, explain and scale.

The names below are imported on first use, so ``import vitlab`` (and ``vitlab --help``) stays fast.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from ._version import __version__

_LAZY = {
    "patchify": "vitlab.ops.patches",
    "unpatchify": "vitlab.ops.patches",
    "num_tokens": "vitlab.ops.patches",
    "PatchEmbedding": "vitlab.layers",
    "MultiHeadSelfAttention": "vitlab.layers",
    "ViTConfig": "vitlab.models",
    "VisionTransformer": "vitlab.models",
    "create_model": "vitlab.runs",
    "list_models": "vitlab.models",
    "load_checkpoint": "vitlab.runs",
    "save_checkpoint": "vitlab.runs",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        if _LAZY[name] == "vitlab.runs":  # checkpoints know every task's kinds: the task wing registers them
            importlib.import_module("vitlab.tasks")
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a subpackage: vitlab.models, ...
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'vitlab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
