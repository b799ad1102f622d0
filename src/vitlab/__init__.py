"""vitlab: Vision Transformers you can understand, train, compare, explain and scale.

The names below are imported on first use, so ``import vitlab`` (and ``vitlab --help``) stays fast. The calls that
mirror the commands (``vitlab.run``, ``compare``, ``evaluate``, ``predict``, ``explain``, ``load``) are
:mod:`vitlab.notebook`'s; ``vitlab.explain`` is also the package of explanations, and calling it is
:func:`vitlab.notebook.explain`. In IPython, importing vitlab registers its objects' rich displays.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from typing import Any

from . import _wiring
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
    "run": "vitlab.notebook.api",
    "compare": "vitlab.notebook.api",
    "evaluate": "vitlab.notebook.api",
    "predict": "vitlab.notebook.api",
    "load": "vitlab.notebook.api",
    "run_folder": "vitlab.notebook.api",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif importlib.util.find_spec(f"{__name__}.{name}") is not None:  # a subpackage: vitlab.models, ...
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module 'vitlab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


def _register_displays() -> None:
    """Rich displays in a running IPython (nothing is imported unless IPython already is)."""
    ipython = sys.modules.get("IPython")
    if ipython is not None and ipython.get_ipython() is not None:
        importlib.import_module("vitlab.notebook.display").register()


class _CallablePackage(types.ModuleType):
    """The ``vitlab.explain`` package, which called is :func:`vitlab.notebook.explain` (``vitlab.explain(RUN)``)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module("vitlab.notebook.api").explain(*args, **kwargs)


class _Vitlab(types.ModuleType):
    """This module: a subpackage ``explain`` set on it (by the import system, on its first import) is callable."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "explain" and type(value) is types.ModuleType:
            value.__class__ = _CallablePackage
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Vitlab
_wiring.register_tasks.append(lambda: importlib.import_module("vitlab.tasks"))  # runs asks which kinds exist
__all__.append("explain")
_register_displays()
