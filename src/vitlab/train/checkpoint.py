"""Checkpoints: weights in safetensors, training state in a tensors-only ``state.pt``.

A checkpoint is a folder::

    model.safetensors   weights; metadata: model name, model config (JSON), dataset, normalisation
    state.pt            (resumable checkpoints only) optimizer, scheduler, epoch, best metric,
                        history, EMA weights

Every file is written atomically (temporary file in the same folder, fsync, ``os.replace``), so an
interrupted write leaves the previous version intact. ``state.pt`` holds only tensors and
primitives and is loaded with ``torch.load(weights_only=True)``: nothing is ever unpickled.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save as safetensors_bytes
from torch import nn

from ..models import create_model

WEIGHTS = "model.safetensors"
STATE = "state.pt"


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def save_weights(model: nn.Module, path: str | Path, metadata: dict[str, Any]) -> None:
    """Save ``model``'s state dict as safetensors; ``metadata`` values are stored as JSON strings."""
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    atomic_write(path, safetensors_bytes(tensors, {k: json.dumps(v) for k, v in metadata.items()}))


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The metadata of a safetensors file written by :func:`save_weights`, JSON-decoded."""
    with safe_open(str(path), framework="pt") as f:
        return {k: json.loads(v) for k, v in (f.metadata() or {}).items()}


@dataclass
class Checkpoint:
    """A model rebuilt from a checkpoint, with the metadata it was saved with."""
    model: nn.Module
    metadata: dict[str, Any]
    path: Path


def weights_path(path: str | Path) -> Path:
    """Resolve a checkpoint argument: a ``.safetensors`` file, a checkpoint folder, or a run folder
    (its ``best/`` checkpoint, else ``last/``)."""
    path = Path(path)
    for candidate in (path, path / WEIGHTS, path / "best" / WEIGHTS, path / "last" / WEIGHTS):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no checkpoint at {path}: pass a model.safetensors file, a checkpoint folder, "
                            f"or a run folder written by `vitlab train --out`")


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> Checkpoint:
    """Rebuild the model saved at ``path`` (see :func:`weights_path`) and load its weights."""
    file = weights_path(path)
    meta = read_metadata(file)
    if "model" not in meta or "config" not in meta:
        raise ValueError(f"{file} has no vitlab metadata (model name and config): it was not written by "
                         f"vitlab train; load it with vitlab.interop instead")
    model = create_model(meta["model"], **meta["config"])
    if meta.get("distilled"):  # a DeiT student: the ViT plus a distillation token and head
        from ..ssl.distill import distilled_from
        model = distilled_from(model)
    model.load_state_dict(load_file(str(file)))
    return Checkpoint(model.to(device).eval(), meta, file)


def save_state(path: str | Path, state: dict[str, Any]) -> None:
    """Atomically ``torch.save`` a dict of tensors and primitives."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    atomic_write(path, buffer.getvalue())


def load_state(path: str | Path) -> dict[str, Any]:
    """Load a :func:`save_state` file without unpickling arbitrary objects."""
    return torch.load(path, map_location="cpu", weights_only=True)
