"""Runs on disk: the one checkpoint format and the one run folder.

- ``checkpoint``: the format: :func:`save_checkpoint`, reading and verifying a safetensors file.
- :class:`DataConfig` (:mod:`vitlab.data.config`, re-exported): what a model needs from its input, recorded in
  every checkpoint; ``loaded``: :class:`Loaded`.
- ``load``: :func:`load_checkpoint`, any model source (a vitlab file or run folder, a hub id, or through
  ``foreign``: timm, Hugging Face, Keras); ``weights``: :func:`load_matching_weights`, :func:`create_model`.
- ``rundir``: :class:`RunDir`, the run folder (file names, lock, refusal of foreign runs, resume); what a folder
  holds is ``contents``, an epoch's files committed as one step is ``commit``.
- ``files``: atomic writes with the user's umask, strict JSON.
"""

from ..data.config import DataConfig
from .checkpoint import save_checkpoint
from .files import atomic_write, read_json, write_json
from .load import checkpoint_data, load_checkpoint
from .loaded import Loaded
from .rundir import RunDir
from .weights import create_model, load_matching_weights

__all__ = [
    "DataConfig",
    "Loaded",
    "RunDir",
    "atomic_write",
    "checkpoint_data",
    "create_model",
    "load_checkpoint",
    "load_matching_weights",
    "read_json",
    "save_checkpoint",
    "write_json",
]
