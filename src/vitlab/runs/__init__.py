"""Runs on disk: the one checkpoint format and the one run folder.

- ``checkpoint``: :func:`save_checkpoint` / :func:`load_checkpoint` (any model source: a vitlab file
  or run folder, timm, Hugging Face, Keras), :class:`DataConfig`, :func:`load_matching_weights`.
- ``rundir``: :class:`RunDir`, the run folder (file names, lock, refusal of foreign runs, resume).
- ``files``: atomic writes with the user's umask, strict JSON.
"""

from .checkpoint import (
    DataConfig,
    Loaded,
    checkpoint_data,
    create_model,
    load_checkpoint,
    load_matching_weights,
    pretrained_cfg,
    save_checkpoint,
)
from .files import atomic_write, read_json, write_json
from .rundir import RunDir

__all__ = [
    "DataConfig",
    "Loaded",
    "RunDir",
    "atomic_write",
    "checkpoint_data",
    "create_model",
    "pretrained_cfg",
    "load_checkpoint",
    "load_matching_weights",
    "read_json",
    "save_checkpoint",
    "write_json",
]
